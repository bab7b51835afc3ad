#!/usr/bin/python3
"""A worker that takes SECONDS (argv[1], default 30) before it reads the hello, like one compiling its kernels."""
import sys
import time
from common import faulty

time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0)
faulty("fault_slow_hello", lambda out: out, after=1 << 62).run()
