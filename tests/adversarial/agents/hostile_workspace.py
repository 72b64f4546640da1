"""Leaves a workspace built to break the harness's passes over it, or to outgrow its caps.

argv: workspace, mode, --marker (and the arena's host paths, ignored but for --answers).
Modes:
  deep         a 1,500-level folder tree (past Python's recursion limit and PATH_MAX) with
               set-id files at the top and the bottom, then an honest submission
  fallocate    posix_fallocate 150 MiB at a time into new files, far past the disk cap; exit 3
  inodes       empty files until the filesystem refuses one; exit 3
  inodes-then-submit
               the same flood, then it deletes a few and submits honestly (it coped)
  specials     a fifo, a listening unix socket, 500 hard links to one 40 MiB file, links to
               /etc/shadow and to the answers' host path, set-id bits; then submits honestly
  unfollowable-inputs
               submits honestly, then leaves the inputs the harness drops as links it cannot
               follow: train.csv to a 300-byte name component (ENAMETOOLONG), test.csv to
               itself (ELOOP)
  unfollowable-submission
               an honest CSV under another name, and submission.csv as a link to a 300-byte
               name component
Reports what each step got (errno names), how far it went, and what it left.
"""

import argparse
import os
import socket
import stat

from _report import emit, outcome, submit_sample

p = argparse.ArgumentParser()
p.add_argument("workspace")
p.add_argument("mode")
for opt in ("--answers", "--public", "--other-run", "--repo-file", "--runs-dir", "--marker"):
    p.add_argument(opt)
a = p.parse_args()
MIB = 1024**2
report: dict = {"mode": a.mode, "tries": {}}
tries = report["tries"]


def deep(levels: int) -> None:
    fd = os.open(".", os.O_RDONLY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    leaf = os.open("setuid-leaf", os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=fd)
    os.write(leaf, b"#!/bin/sh\nid\n")
    os.fchmod(leaf, 0o6755)
    os.close(leaf)
    os.close(fd)
    report["levels"] = levels


def flood() -> None:
    n = 0
    try:
        while True:
            open(f"e{n}", "w").close()
            n += 1
    except OSError as exc:
        tries["flood"] = f"{type(exc).__name__}:{exc.errno}"
    report["files"] = n


def fallocate() -> None:
    total = 0
    for i in range(40):  # 6 GiB asked for, against a cap of a fraction of that
        fd = os.open(f"alloc-{i}.bin", os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.posix_fallocate(fd, 0, 150 * MIB)
            total += 150 * MIB
        except OSError as exc:
            tries.setdefault("fallocate", f"{type(exc).__name__}:{exc.errno}")
        finally:
            os.close(fd)
    report["allocated_mib"] = total // MIB


def specials() -> None:
    tries["mkfifo"] = outcome(lambda: os.mkfifo("pipe"))
    server = socket.socket(socket.AF_UNIX)
    tries["socket"] = outcome(lambda: server.bind("listening.sock"))
    with open("blob.bin", "wb") as f:
        f.write(os.urandom(MIB) * 40)
    links = 0
    for i in range(500):
        if outcome(lambda i=i: os.link("blob.bin", f"blob-{i}.bin")) == "ok":
            links += 1
    report["hard_links"] = links
    tries["symlink_shadow"] = outcome(lambda: os.symlink("/etc/shadow", "shadow"))
    if a.answers:
        tries["symlink_answers"] = outcome(lambda: os.symlink(a.answers, "answers.csv"))
    with open("suid.sh", "w") as f:
        f.write("#!/bin/sh\nid\n")
    tries["chmod_setuid"] = outcome(lambda: os.chmod("suid.sh", 0o6755))
    report["setuid_kept_inside"] = bool(os.stat("suid.sh").st_mode & stat.S_ISUID)


LONG = "/" + "a" * 300  # past NAME_MAX (255): whoever follows it gets ENAMETOOLONG


def unfollowable(name: str, target: str) -> None:
    os.unlink(name)
    tries[name] = outcome(lambda: os.symlink(target, name))
    report[name] = os.readlink(name)


if a.mode == "deep":
    os.chmod("INSTRUCTIONS.md", 0o4644)
    deep(1500)
    submit_sample()
elif a.mode == "fallocate":
    fallocate()
elif a.mode in ("inodes", "inodes-then-submit"):
    flood()
if a.mode == "inodes-then-submit":
    for i in range(10):
        os.unlink(f"e{i}")
    submit_sample()
elif a.mode == "specials":
    specials()
    submit_sample()
elif a.mode == "unfollowable-inputs":
    submit_sample()
    unfollowable("train.csv", LONG)
    unfollowable("test.csv", "test.csv")
elif a.mode == "unfollowable-submission":
    submit_sample()
    os.rename("submission.csv", "my-submission.csv")
    tries["submission.csv"] = outcome(lambda: os.symlink(LONG, "submission.csv"))
    report["submission.csv"] = os.readlink("submission.csv")
emit(report)
raise SystemExit(3 if a.mode in ("fallocate", "inodes") else 0)
