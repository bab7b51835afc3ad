#!/usr/bin/python3
"""A worker that returns its output one column short: the client sends it as returned."""
from common import faulty, main_output

faulty("fault_wrong_shape", lambda out: main_output(out)[:, :-1]).run()
