"""Tampering: the task, the answers, other runs, the repository and the harness's Python."""

from __future__ import annotations

import stat
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.adversarial_arena import PWNED, Arena

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


def test_nothing_outside_the_workspace_can_be_modified(arena: Arena):
    stdlib = sysconfig.get_paths(vars={"installed_base": sys.base_prefix})["stdlib"]
    out = arena.run(
        "tamper.py",
        *arena.targets(),
        "--site-packages",
        str(arena.site_packages),
        "--stdlib",
        stdlib,
        budget=20,
    )
    tries = out.report()["tries"]
    own = {k: v for k, v in tries.items() if k.startswith("own_sample_copy:")}
    allowed = ("tmp:", "workspace_setuid")
    others = {k: v for k, v in tries.items() if k not in own and not k.startswith(allowed)}
    # Positive controls: it can write where it may (its workspace copy, its private /tmp).
    assert own["own_sample_copy:append"] == "ok" and own["own_sample_copy:rename"] == "ok"
    assert tries["tmp:plant"] == "ok"
    granted = {k: v for k, v in others.items() if v == "ok"}
    assert not granted, f"modified from inside the sandbox: {granted}"
    assert len(others) > 40
    # Its private /tmp vanished with the sandbox; nothing was planted on the host.
    assert not list(Path("/tmp").glob(f"*{PWNED}*"))
    assert not list(Path(stdlib).glob(f"*{PWNED}*"))
    # The setuid program it made in its workspace is harmless once the attempt is over.
    assert tries["workspace_setuid"] == "ok"
    setid = [
        p
        for p in out.workspace.rglob("*")
        if not p.is_symlink() and p.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    ]
    assert not setid, f"setuid/setgid files left on the host: {setid}"
    assert (out.workspace / f"{PWNED}-suid").is_file()
    # It submitted the sample before scribbling over its own copy of it.
    assert out.record.status == "success"
    assert out.record.score == pytest.approx(0.5)
    arena.assert_host_unchanged()
