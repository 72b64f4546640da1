"""Data exfiltration: the private answers, other runs, the repo, the host's secrets."""

from __future__ import annotations

import pytest

from runner.config import REPO_ROOT
from tests.adversarial.conftest import Arena

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]


def test_private_answers_are_out_of_reach_by_every_route(arena: Arena):
    out = arena.run("exfiltrate.py", *arena.targets(), budget=30)
    report = out.report()
    assert report["reads"], "the agent tried nothing"
    assert any(k.startswith("answers:/proc/") for k in report["reads"])
    leaked = {route: got for route, got in report["reads"].items() if got == "ok"}
    assert not leaked, f"readable from inside the sandbox: {leaked}"
    assert report["found"] == [], report["found"]
    # Walking up ends at the sandbox's own root: the host's repo and data folders are not there.
    top = report["walk_up"][-1]
    assert top["cwd"] == "/"
    # (A clone under /tmp shares its top folder's name with the sandbox's own, empty /tmp.)
    if REPO_ROOT.parts[1] != "tmp":
        assert REPO_ROOT.parts[1] not in top["entries"], top["entries"]
    assert all(level["cwd"] != str(out.run_dir) for level in report["walk_up"])
    # Had it got the answers, it would have submitted them for a perfect score.
    assert report["submitted"] == "sample"
    assert out.record.status == "success"
    assert out.record.score == pytest.approx(0.5)
    arena.assert_host_unchanged()


def test_a_symlink_planted_as_the_submission_is_not_followed(arena: Arena):
    out = arena.run("submit.py", "symlink-answers", *arena.targets())
    report = out.report()
    assert report["created"] == "symlink"
    assert out.record.status == "invalid_submission"
    assert out.record.validation_code == "not_regular_file"
    assert "symbolic link" in out.record.validation_message
    assert out.record.score is None
    assert out.workspace.joinpath("submission.csv").is_symlink()
    arena.assert_host_unchanged()


def test_host_secrets_are_invisible(arena: Arena):
    out = arena.run("secrets.py", budget=30)
    report = out.report()
    assert report["scanned_files"] > 10, "the agent did not look"
    assert report["hits"] == [], f"secret material visible inside: {report['hits']}"
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TMLBENCH_ADVERSARIAL_TOKEN"):
        assert var not in report["env"]
        assert all(var not in env for env in report["proc_environ"].values())
    assert set(report["env"]) <= {
        "PATH", "HOME", "TMPDIR", "LANG", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
        "MPLCONFIGDIR", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
        "TMLBENCH_WORKSPACE", "TMLBENCH_BUDGET_SECONDS", "TMLBENCH_SEED", "TMLBENCH_TASK_ID",
    }  # fmt: skip
    assert report["proc_environ"], "the agent saw no process environments at all"
    # Nothing the attempt left behind carries the key either.
    for path in out.run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert arena.secret.encode() not in path.read_bytes(), path
    assert out.record.status == "success"
    arena.assert_host_unchanged()
