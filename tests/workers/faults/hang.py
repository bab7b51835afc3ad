#!/usr/bin/python3
"""A worker that never answers a call: ignores SIGTERM and leaves a child
(`sleep`) in its process group, so only killing the group ends both. Its
stderr names the child's pid."""
import signal
import subprocess
import sys
from common import faulty, stall


def hang(out):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen(["sleep", "3600"])
    sys.stderr.write("hang: child pid %d\n" % child.pid)
    sys.stderr.flush()
    stall()


faulty("fault_hang", hang).run()
