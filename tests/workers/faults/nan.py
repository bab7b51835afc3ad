#!/usr/bin/python3
"""A worker whose output has one NaN (row 0, column 0), the rest right."""
import numpy as np
from common import faulty


def poison(out):
    out = dict(out) if isinstance(out, dict) else {"out": out}
    out["out"] = out["out"].copy()
    out["out"][0, 0] = np.nan
    return out


faulty("fault_nan", poison).run()
