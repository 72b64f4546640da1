"""The run explorer's reads of files an agent wrote (app/run_files.py): only a regular file inside
the run folder, reached without following a link, and only its head, through the same guard as
the grader's (``runner.agent_files``: folder descriptors, ``O_NOFOLLOW | O_NONBLOCK``).

A run folder is the agent's to fill: whatever it planted where the record points (a link to
/etc/passwd, a FIFO no one writes, a 10 GiB file, a folder, a loop), the dashboard shows its own
file or nothing, never a byte from outside the run folder, and never waits."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hyp

from app import run_files

SECRET = "secret outside the run folder"
FIELDS = ("stdout_path", "stderr_path", "transcript_path", "submission_path")
LIMIT = 1024  # bytes of a file the tests ask for


def _run(tmp: Path) -> tuple[Path, Path]:
    """A run folder and, beside it, a file the agent must never get shown."""
    run = tmp / "run"
    (run / "workspace" / "sub").mkdir(parents=True)
    (run / "record.json").write_text("{}")
    secret = tmp / "secret.txt"
    secret.write_text(SECRET)
    return run, secret


def _symlink_to_etc_passwd(run: Path, secret: Path) -> str:
    os.symlink("/etc/passwd", run / "log.txt")
    return "log.txt"


def _symlink_outside(run: Path, secret: Path) -> str:
    os.symlink(secret, run / "log.txt")
    return "log.txt"


def _relative_symlink_outside(run: Path, secret: Path) -> str:
    os.symlink("../secret.txt", run / "workspace" / "submission.csv")
    return "workspace/submission.csv"


def _symlinked_folder(run: Path, secret: Path) -> str:
    os.symlink(secret.parent, run / "workspace" / "up")
    return "workspace/up/secret.txt"


def _fifo(run: Path, secret: Path) -> str:
    os.mkfifo(run / "stdout.log")  # no writer will ever come: opening it for reading would wait
    return "stdout.log"


def _socket(run: Path, secret: Path) -> str:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(run / "stdout.log"))
    server.close()
    return "stdout.log"


def _directory(run: Path, secret: Path) -> str:
    return "workspace/sub"


def _loop(run: Path, secret: Path) -> str:
    os.symlink("loop.txt", run / "loop.txt")
    return "loop.txt"


def _dot_dot(run: Path, secret: Path) -> str:
    return "../secret.txt"


def _absolute(run: Path, secret: Path) -> str:
    return str(secret)


def _nul(run: Path, secret: Path) -> str:
    return "log\0.txt"


def _long_link(run: Path, secret: Path) -> str:
    os.symlink("/" + "x" * 300, run / "log.txt")  # resolving it: ENAMETOOLONG
    return "log.txt"


HOSTILE: dict[str, Callable[[Path, Path], str]] = {
    "symlink to /etc/passwd": _symlink_to_etc_passwd,
    "symlink to a file outside": _symlink_outside,
    "relative symlink out": _relative_symlink_outside,
    "path through a symlinked folder": _symlinked_folder,
    "FIFO": _fifo,
    "socket": _socket,
    "directory": _directory,
    "symlink loop": _loop,
    "..": _dot_dot,
    "absolute path": _absolute,
    "NUL in the name": _nul,
    "symlink to a 300-byte name": _long_link,
}


def _record(run: Path, relative: str) -> dict[str, object]:
    return {"source_path": str(run / "record.json"), **dict.fromkeys(FIELDS, relative)}


@pytest.mark.timeout(30)  # a FIFO opened without O_NONBLOCK would hang here, not fail
@pytest.mark.parametrize("plant", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_planted_entry_shows_nothing(tmp_path: Path, plant: Callable[[Path, Path], str]):
    run, secret = _run(tmp_path)
    record = _record(run, plant(run, secret))
    for field in FIELDS:
        assert run_files.run_file_preview(record, field, LIMIT) is None, field
    assert run_files.run_transcript(record) is None


@pytest.mark.timeout(30)
def test_a_huge_file_shows_its_head_only(tmp_path: Path):
    run, _ = _run(tmp_path)
    with open(run / "stdout.log", "wb") as huge:  # 10 GiB, sparse: reading it all would not end
        huge.write(b"first line\n")
        huge.truncate(10 * 2**30)
    text = run_files.run_file_preview(_record(run, "stdout.log"), "stdout_path", LIMIT)
    assert text is not None and text.startswith("first line\n")
    assert text.endswith("\n… (truncated)") and len(text) <= LIMIT + len("\n… (truncated)")


# Paths an agent's record could point to, made of names it planted: a regular file anywhere in
# the run folder is shown; whatever else the path meets (a link, a FIFO, a folder, `..`) shows
# nothing, and nothing outside the run folder is ever shown.
ENTRIES = {
    "file": "regular",
    "link-file": "link to the file inside",
    "link-out": "link to the secret outside",
    "link-dir": "link to the folder outside",
    "fifo": "FIFO",
    "dir": "folder",
}
COMPONENTS = hyp.sampled_from([*ENTRIES, "..", ".", "nope", "workspace"])


def _plant_every_entry(run: Path, secret: Path) -> None:
    for folder in (run, run / "workspace", run / "workspace" / "dir"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "file").write_text(f"inside {folder.name}")
        os.symlink(folder / "file", folder / "link-file")
        os.symlink(secret, folder / "link-out")
        os.symlink(secret.parent, folder / "link-dir")
        os.mkfifo(folder / "fifo")
    (run / "dir").mkdir()


@pytest.mark.timeout(120)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parts=hyp.lists(COMPONENTS, min_size=1, max_size=4))  # 150 paths of 1 to 4 components
def test_only_a_regular_file_reached_without_links_inside_the_run_is_shown(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str]
):
    tmp = tmp_path_factory.mktemp("hostile")
    run, secret = _run(tmp)
    _plant_every_entry(run, secret)
    relative = "/".join(parts)
    shown = run_files.run_file_preview(_record(run, relative), "stdout_path", LIMIT)
    # what the path names when read as the guard reads it: each component in turn, no link
    # followed, no `..`; only a regular file at the end is shown
    expected = None
    names = [part for part in parts if part != "."]  # a path's `.` names nothing (as in POSIX)
    if ".." not in names:
        here = run
        for i, part in enumerate(names):
            here = here / part
            last = i == len(names) - 1
            if here.is_symlink() or not here.exists() or here.is_fifo():
                break
            if last and here.is_file():
                expected = here.read_text()
            if not here.is_dir():
                break
    assert shown == expected, relative
    assert shown is None or SECRET not in shown
