#!/usr/bin/python3
"""A worker that is right but floods its stderr before its hello: 3 MB of
empty lines, then 2 MB of text. conform must relay no blank line, at most
1 MiB of the rest with one line saying the remainder was not shown, and judge
the worker as usual (its stderr cannot cost conform's output more than that)."""
import os
from common import faulty

os.write(2, b"\n" * 3_000_000)
for _ in range(20):
    os.write(2, (b"noise " * 16 + b"\n") * 1000)
faulty("fault_noisy_stderr", lambda out: out).run()
