"""Hostile submissions: the grader reads them outside the sandbox, as data, never following."""

from __future__ import annotations

import pytest

from tests.adversarial.conftest import DISK_CAP, MIB, Arena, tree_bytes

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


@pytest.mark.parametrize(
    ("mode", "created", "code"),
    [
        ("symlink-device", "symlink", "not_regular_file"),
        ("fifo", "fifo", "not_regular_file"),
        ("device", "symlink", "not_regular_file"),  # mknod is refused; the fallback is a link
        ("directory", "dir", "not_regular_file"),
        ("huge", "file", "too_large"),
        ("binary", "file", "unreadable_csv"),
    ],
)
def test_hostile_submission_is_invalid_with_a_reason(arena: Arena, mode, created, code):
    out = arena.run("submit.py", mode, *arena.targets(), budget=20)
    report = out.report()
    assert report["created"] == created, report
    record = out.record
    assert record.status == "invalid_submission", (record.status, record.error_message)
    assert record.validation_code == code, record.validation_message
    assert record.score is None and record.submission_path == "workspace/submission.csv"
    assert out.returned - out.started < 10  # the grader never blocked on it
    if mode == "device":
        assert report["tries"]["mknod"].startswith("PermissionError"), report
        assert report["tries"]["hardlink_dev_zero"] != "ok", report
    if mode == "huge":
        for how in ("truncate_5GiB", "seek_write_5GiB", "fallocate_5GiB"):
            assert report["tries"][how] == "OSError:27", report  # EFBIG: the file size cap
        assert report["size_written"] <= DISK_CAP
        assert "MiB" in record.validation_message or "bytes" in record.validation_message
        # Sparse: nothing big landed on the host's disk.
        assert tree_bytes(out.workspace) < 16 * MIB
    arena.assert_host_unchanged()
