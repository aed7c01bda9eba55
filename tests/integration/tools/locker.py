#!/usr/bin/env python3
"""POSIX byte-range lock helper run inside lab clients.

  locker.py hold PATH START LEN MARKER RELEASE TIMEOUT [shared]
      takes an exclusive lock (blocking; shared: a read lock on a read-only
      open), creates MARKER, waits until RELEASE exists (or TIMEOUT
      seconds), then unlocks; exit 0 if it held the lock.
  locker.py try PATH START LEN [shared]
      non-blocking lock attempt: exit 0 when granted, 3 on conflict.
  locker.py test PATH START LEN
      F_GETLK: prints "none" or "<type> <start> <len> <pid>".
"""
import errno
import fcntl
import os
import struct
import sys
import time


def hold(path, start, length, marker, release, timeout, shared):
    fd = os.open(path, os.O_RDONLY if shared else os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX, length, start)
    open(marker, "w").close()
    deadline = time.monotonic() + timeout
    while not os.path.exists(release):
        if time.monotonic() > deadline:
            return 2
        time.sleep(0.05)  # polling a file the test creates
    fcntl.lockf(fd, fcntl.LOCK_UN, length, start)
    os.close(fd)
    return 0


def try_lock(path, start, length, shared):
    fd = os.open(path, os.O_RDWR)
    mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    try:
        fcntl.lockf(fd, mode, length, start)
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return 3
        raise
    fcntl.lockf(fd, fcntl.LOCK_UN, length, start)
    return 0


def test_lock(path, start, length):
    fd = os.open(path, os.O_RDWR)
    # struct flock: short l_type, short l_whence, off_t l_start, off_t l_len,
    # pid_t l_pid (x86_64 layout).
    req = struct.pack("hhqqi", fcntl.F_WRLCK, 0, start, length, 0)
    res = fcntl.fcntl(fd, fcntl.F_GETLK, req + b"\0" * 4)
    ltype, _, lstart, llen, lpid = struct.unpack("hhqqi", res[:28])
    if ltype == fcntl.F_UNLCK:
        print("none")
    else:
        kind = "write" if ltype == fcntl.F_WRLCK else "read"
        print(kind, lstart, llen, lpid)
    return 0


def main(argv):
    cmd = argv[1]
    if cmd == "hold":
        return hold(argv[2], int(argv[3]), int(argv[4]), argv[5], argv[6],
                    float(argv[7]), len(argv) > 8 and argv[8] == "shared")
    if cmd == "try":
        return try_lock(argv[2], int(argv[3]), int(argv[4]),
                        len(argv) > 5 and argv[5] == "shared")
    if cmd == "test":
        return test_lock(argv[2], int(argv[3]), int(argv[4]))
    raise SystemExit("usage: locker.py hold|try|test ...")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
