#!/usr/bin/env python3
"""Keeps a file open across a proxy restart (run inside a lab client).

  holder.py PATH READY GO TIMEOUT
      opens PATH read-write, writes "before\\n", creates READY, waits for GO
      (or TIMEOUT seconds), then writes "after\\n" through the same file
      descriptor, fsyncs, reads the whole file back through it and prints it.
      Exit 0 only if every step succeeded (no ESTALE, no EIO).
"""
import os
import sys
import time


def main(path, ready, go, timeout):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"before\n")
    os.fsync(fd)
    open(ready, "w").close()
    deadline = time.monotonic() + timeout
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            print("timed out waiting for", go)
            return 2
        time.sleep(0.1)  # polling a file the test creates
    os.write(fd, b"after\n")
    os.fsync(fd)
    os.lseek(fd, 0, os.SEEK_SET)
    sys.stdout.write(os.read(fd, 4096).decode())
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
