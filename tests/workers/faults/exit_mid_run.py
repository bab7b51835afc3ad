#!/usr/bin/python3
"""A worker that answers CONFORM_FAULT_AFTER calls (default here 3) and exits 1 inside the next."""
import os
import sys
from common import faulty

faulty("fault_exit_mid_run", lambda out: sys.exit(1), after=int(os.environ.get("CONFORM_FAULT_AFTER", "3"))).run()
