"""Leaves a hostile ``submission.csv`` for the grader (which runs outside, on the host).

argv: workspace, mode, optional --answers and other host paths, --marker. Modes:
symlink-answers (a link to the private answers' host path), symlink-device (to
/dev/zero), fifo, device (mknod; falls back to a hard link, then a symlink), directory,
huge (5 GiB: truncate, seek+write, then the largest sparse file the caps allow), binary
(random bytes with NULs); overflow-one / overflow-all (the sample submission with ``--value``
as the prediction of its first row / of every row: finite numbers whose metric overflows).
"""

import argparse
import csv
import os
import stat

from _report import emit, outcome

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("mode")
p.add_argument("--value", help="the prediction written by the overflow modes")
for opt in ("--answers", "--public", "--other-run", "--repo-file", "--runs-dir", "--marker"):
    p.add_argument(opt)
a = p.parse_args()
SUB = "submission.csv"
GIB = 1024**3
report: dict = {"mode": a.mode, "tries": {}}
tries = report["tries"]


def kind() -> str:
    try:
        st = os.lstat(SUB)
    except OSError:
        return "missing"
    for name, test in (("symlink", stat.S_ISLNK), ("fifo", stat.S_ISFIFO), ("dir", stat.S_ISDIR)):
        if test(st.st_mode):
            return name
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return "device"
    return "file"


if a.mode == "symlink-answers":
    tries["symlink"] = outcome(lambda: os.symlink(a.answers, SUB))
elif a.mode == "symlink-device":
    tries["symlink"] = outcome(lambda: os.symlink("/dev/zero", SUB))
elif a.mode == "fifo":
    tries["mkfifo"] = outcome(lambda: os.mkfifo(SUB))
elif a.mode == "device":
    tries["mknod"] = outcome(lambda: os.mknod(SUB, stat.S_IFCHR | 0o644, os.makedev(1, 5)))
    if kind() == "missing":
        tries["hardlink_dev_zero"] = outcome(lambda: os.link("/dev/zero", SUB))
    if kind() == "missing":
        tries["symlink_dev_zero"] = outcome(lambda: os.symlink("/dev/zero", SUB))
elif a.mode == "directory":
    tries["mkdir"] = outcome(lambda: os.mkdir(SUB))
elif a.mode == "huge":

    def truncate(size: int) -> None:
        with open(SUB, "wb") as f:
            f.write(b"id,Exited\n")
            f.truncate(size)

    def seek_write(offset: int) -> None:
        with open(SUB, "r+b") as f:
            f.seek(offset)
            f.write(b"1,0.5\n")

    tries["truncate_5GiB"] = outcome(lambda: truncate(5 * GIB))
    tries["seek_write_5GiB"] = outcome(lambda: seek_write(5 * GIB))
    tries["fallocate_5GiB"] = outcome(
        lambda: os.posix_fallocate(os.open(SUB, os.O_WRONLY), 0, 5 * GIB)
    )
    # Settle for the biggest file the caps allow, halving until one fits (sparse: no disk).
    size = 5 * GIB
    while size > 1024 and outcome(lambda s=size: truncate(s)) != "ok":
        size //= 2
    report["size_written"] = os.lstat(SUB).st_size
elif a.mode == "binary":
    with open(SUB, "wb") as f:
        f.write(b"\x00\xff\xfe" + os.urandom(1 << 20) + b"\x00" * 4096)
    tries["binary"] = "ok"
elif a.mode in ("overflow-one", "overflow-all"):

    def overflow() -> None:
        with open("sample_submission.csv", newline="") as f:
            rows = list(csv.reader(f))
        for i, row in enumerate(rows[1:]):
            if a.mode == "overflow-all" or i == 0:
                row[1] = a.value
        with open(SUB, "w", newline="") as f:
            csv.writer(f).writerows(rows)

    tries["overflow"] = outcome(overflow)
    report["value"] = a.value
else:
    raise SystemExit(f"unknown mode {a.mode}")

report["created"] = kind()
emit(report)
