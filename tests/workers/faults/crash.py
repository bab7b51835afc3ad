#!/usr/bin/python3
"""A worker that dies of SIGABRT in a call (a segfaulting kernel's cousin)."""
import os
from common import faulty

faulty("fault_crash", lambda out: os.abort()).run()
