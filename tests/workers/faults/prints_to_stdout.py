#!/usr/bin/python3
"""A worker whose kernels print to stdout four ways (print, sys.stdout, fd 1,
C printf) and are otherwise right: it must conform, because the client moved
fd 1 to stderr before any kernel ran. With CONFORM_WORKER set (conform sets
it) the move happens at import, so the print below, before run(), is safe too."""
import ctypes
import os
import sys
from common import faulty

libc = ctypes.CDLL(None)


def chatty(out):
    print("print: computing")
    sys.stdout.write("sys.stdout: computing\n")
    os.write(1, b"fd 1: computing\n")
    libc.printf(b"printf: computing\n")
    libc.fflush(None)
    return out


w = faulty("fault_prints_to_stdout", chatty)
if os.environ.get("CONFORM_WORKER"):
    print("import time: loading kernels")
w.run()
