#!/usr/bin/env python3
"""Generates the benchmark source tree: 300 directories, 1,500 files, about
16 MB, deterministic (seeded), as a directory or a tar archive.

  gen_tree.py DIR            write the tree under DIR
  gen_tree.py --tar FILE     write it as an uncompressed tar archive
"""
import io
import os
import random
import sys
import tarfile

# The benchmark's tree; the demo asks for a smaller one through the
# environment (GEN_DIRS, GEN_FILES, GEN_BYTES).
DIRS = int(os.environ.get("GEN_DIRS", 300))
FILES = int(os.environ.get("GEN_FILES", 1500))
TOTAL_BYTES = int(os.environ.get("GEN_BYTES", 16 * 1000 * 1000))


def layout(seed=1500):
    rng = random.Random(seed)
    dirs = ["src"]
    while len(dirs) < DIRS:
        parent = rng.choice(dirs)
        dirs.append("%s/d%03d" % (parent, len(dirs)))
    # File sizes: mostly small, a few large (lognormal), scaled to the total.
    raw = [rng.lognormvariate(8.5, 1.2) for _ in range(FILES)]
    scale = TOTAL_BYTES / sum(raw)
    files = []
    for i, r in enumerate(raw):
        d = rng.choice(dirs)
        files.append(("%s/f%04d.c" % (d, i), max(1, int(r * scale))))
    return dirs, files


def content(name, size):
    rng = random.Random(name)
    line = ("/* %s */ int v%d = %d;\n" % (name, rng.randrange(1 << 20),
                                          rng.randrange(1 << 30))).encode()
    return (line * (size // len(line) + 1))[:size]


def write_dir(root):
    dirs, files = layout()
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for name, size in files:
        with open(os.path.join(root, name), "wb") as f:
            f.write(content(name, size))


def write_tar(path):
    dirs, files = layout()
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as t:
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            info.mtime = 1700000000
            t.addfile(info)
        for name, size in files:
            info = tarfile.TarInfo(name)
            info.size = size
            info.mode = 0o644
            info.mtime = 1700000000
            t.addfile(info, io.BytesIO(content(name, size)))


if __name__ == "__main__":
    if sys.argv[1] == "--tar":
        write_tar(sys.argv[2])
    else:
        write_dir(sys.argv[1])
