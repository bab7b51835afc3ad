#!/usr/bin/python3
"""A worker that exits 1 before its hello, as one whose import fails would."""
import sys

sys.stderr.write("early_exit: no GPU found, giving up before the hello\n")
sys.exit(1)
