#!/usr/bin/python3
"""orphan_cmd.py — a command worker (which may start processes: a compiler, a
pool) that tries to leave some behind: a child in a session of its own
(setsid), a double-forked daemon, a `nohup sleep` in the background. Each
carries this file's name on its command line, so that `pgrep -f orphan_cmd.py`
finds a survivor. Its calls fail, naming what it managed.

Refused by: setsid and setpgid (the command sandbox's seccomp filter,
harness/worker/sandbox.cpp), so everything it starts stays in its process
group, which the judge kills as a whole when it stops the worker
(harness/worker/process.cpp)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workers", "faults"))
from common import faulty  # noqa: E402

HERE = os.path.abspath(__file__)
notes = []


def linger():
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", HERE])


def try_everything():
    try:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", HERE], start_new_session=True)
        notes.append("setsid child: ALLOWED")
    except OSError as e:
        notes.append("setsid child: %s" % e.strerror)
    pid = os.fork()
    if pid == 0:  # the daemon: fork again, detach, linger
        try:
            os.setsid()
        except OSError:
            pass
        if os.fork() == 0:
            for fd in (0, 1, 2):
                os.close(fd)
            linger()
        os._exit(0)
    os.waitpid(pid, 0)
    notes.append("double fork: done")
    subprocess.Popen(["nohup", sys.executable, "-c", "import time; time.sleep(120)", HERE],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    notes.append("nohup: started")
    try:
        os.setsid()
        notes.append("setsid: ALLOWED")
    except OSError as e:
        notes.append("setsid: %s" % e.strerror)


def fail(result):
    if not notes:
        try_everything()
    raise RuntimeError("hostile: processes left behind: " + "; ".join(notes))


faulty("hostile-orphan-cmd", fail, after=0).run()
