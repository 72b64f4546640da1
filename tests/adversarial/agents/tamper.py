"""Tries to modify what is not its own: the task, the answers, other runs, the harness.

argv: workspace, --answers/--public/--other-run/--repo-file/--runs-dir (host paths),
--site-packages and --stdlib (host paths of the harness's Python), --marker. Every file it
tries to plant is called ``*adversarial-pwned*``. Its own workspace copies of the public
files are fair game (a positive control that writing works at all).
"""

import argparse
import os
import shutil
import sysconfig

from _report import emit, outcome, submit_sample

p = argparse.ArgumentParser()
p.add_argument("workspace")
for opt in ("--answers", "--public", "--other-run", "--repo-file", "--runs-dir"):
    p.add_argument(opt)
p.add_argument("--site-packages")
p.add_argument("--stdlib")
p.add_argument("--marker")
a = p.parse_args()
PWNED = "adversarial-pwned"
tries: dict = {}
report: dict = {"tries": tries}
submit_sample()  # before it scribbles over its own copy of the sample


def append(path: str) -> None:
    with open(path, "ab") as f:
        f.write(b"\n999999,1\n")


def modify(label: str, path: str) -> None:
    tries[f"{label}:append"] = outcome(lambda: append(path))
    tries[f"{label}:truncate"] = outcome(lambda: os.truncate(path, 0))
    tries[f"{label}:chmod"] = outcome(lambda: os.chmod(path, 0o777))
    tries[f"{label}:utime"] = outcome(lambda: os.utime(path, (0, 0)))
    tries[f"{label}:rename"] = outcome(lambda: os.rename(path, path + "." + PWNED))
    tries[f"{label}:unlink"] = outcome(lambda: os.unlink(path))


def probe_write(label: str, path: str) -> None:
    """Open for writing and touch the mtime only: the repository is not to be broken for real."""
    tries[f"{label}:open_write"] = outcome(
        lambda: os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    )
    tries[f"{label}:utime"] = outcome(lambda: os.utime(path))


def plant(label: str, folder: str, name: str = f"{PWNED}.py") -> None:
    def write() -> None:
        with open(os.path.join(folder, name), "w") as f:
            f.write("import os; os.system('touch /tmp/adversarial-pwned-ran')\n")

    tries[f"{label}:plant"] = outcome(write)
    tries[f"{label}:mkdir"] = outcome(lambda: os.mkdir(os.path.join(folder, f"{PWNED}-dir")))


# The task, the answers, another run, the repository: by their host paths.
modify("answers", a.answers)
modify("public_train", os.path.join(a.public, "train.csv"))
modify("other_run_record", os.path.join(a.other_run, "record.json"))
probe_write("repo_file", a.repo_file)
plant("runs_dir", a.runs_dir)
plant("private_dir", os.path.dirname(a.answers))
# The harness's Python: a .pth or sitecustomize runs in every later harness process.
inside = sysconfig.get_paths()
for label, folder in [
    ("site_packages_inside", inside["purelib"]),
    ("site_packages_host", a.site_packages),
    ("stdlib_inside", inside["stdlib"]),
    ("stdlib_host", a.stdlib),
]:
    plant(label, folder)
    plant(label + "_pth", folder, f"{PWNED}.pth")
probe_write("venv_python", os.path.join(inside["scripts"], "python"))
# The agent's own code, the system, the sandbox's own root.
plant("agent_dir", os.path.dirname(os.path.abspath(__file__)))
probe_write("own_code", os.path.abspath(__file__))
plant("usr_lib", "/usr/lib")
plant("root", "/")
plant("etc", "/etc")
probe_write("etc_passwd", "/etc/passwd")
tries["workspace:rename"] = outcome(lambda: os.rename(a.workspace, a.workspace + "-" + PWNED))
tries["workspace:rmdir"] = outcome(lambda: os.rmdir(a.workspace))
# Its private /tmp is writable (and must vanish with the sandbox, not land on the host's /tmp).
plant("tmp", "/tmp")
# Its uid is the host's root on the workspace's disk: a setuid copy of a program there would
# be a root shell for any host user who can reach the run folder. Allowed inside; the harness
# must clear the bits before anyone outside can use them.


def setuid_copy() -> None:
    shutil.copyfile("/usr/bin/id", f"{PWNED}-suid")
    os.chmod(f"{PWNED}-suid", 0o6755)
    os.mkdir(f"{PWNED}-sgid-dir")
    os.chmod(f"{PWNED}-sgid-dir", 0o2777)


tries["workspace_setuid"] = outcome(setuid_copy)
# Positive control: its own copies in the workspace are its to change.
modify("own_sample_copy", os.path.join(a.workspace, "sample_submission.csv"))
emit(report)
