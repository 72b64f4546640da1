"""A suite's bundle as one thing: published into its folder atomically, or packed as a zip.

``publish_report`` is what `tmlbench report` and Dagster's ``reports`` asset run: the bundle is
written into a new folder beside the published one, then swapped in, so a reader of the folder
finds the previous bundle whole or the new one whole, never a mix of both (a figure the new
bundle leaves out gone, a CSV of the old numbers beside a report.html of the new). ``report_zip``
is what the dashboard offers for download.
"""

from __future__ import annotations

import ctypes
import errno
import io
import json
import os
import re
import secrets
import shutil
import tempfile
import zipfile
from dataclasses import replace
from pathlib import Path

import duckdb

from runner.errors import TmlbenchError
from warehouse.report.bundle import ReportManifest, write_report

# A suite id that may name a folder (and a zip's top folder) as it is: one plain path component.
# Not starting with a dot: the bundles being written are the dot-folders beside the published.
FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# renameat2(2): swap two paths in one step (Linux 3.15+; glibc 2.28+ has the wrapper)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# the rename cannot exchange here (no such call, or a file system that does not support it)
_NO_EXCHANGE = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP}
# a zip's entries carry this time, not the clock's: the same bundle gives the same zip
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def bundle_folder(reports_dir: Path, suite_id: str) -> Path:
    """``<reports_dir>/<suite_id>``; a suite id that is not a plain folder name is refused."""
    if not FOLDER_NAME.fullmatch(suite_id):
        raise TmlbenchError(
            f"suite id {suite_id!r} cannot name a report folder under {reports_dir}: use "
            "letters, digits, '.', '-' and '_', not starting with '.' (the suite file's name)"
        )
    return Path(reports_dir) / suite_id


def bundle_suite(folder: Path) -> str | None:
    """The suite whose bundle ``folder`` holds (its ``manifest.json`` names it), or None when
    ``folder`` is not a report bundle (no such folder, a symlink, no manifest of ours)."""
    if folder.is_symlink() or not folder.is_dir():
        return None
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    suite = manifest.get("suite_id") if isinstance(manifest, dict) else None
    return suite if isinstance(suite, str) else None


def publish_report(
    con: duckdb.DuckDBPyConnection, suite_id: str, folder: Path, source: str = "the snapshot"
) -> ReportManifest:
    """Write ``suite_id``'s bundle to ``folder``, replacing what was there in one step
    (``write_report``'s arguments and errors; nothing is replaced when it raises).

    ``folder`` must be new, empty, or a report bundle: anything else is refused, since the
    previous content is deleted once the new bundle is in place.
    """
    folder = Path(folder).absolute()
    if folder.is_symlink() or (
        folder.exists()
        and (not folder.is_dir() or (any(folder.iterdir()) and bundle_suite(folder) is None))
    ):
        raise TmlbenchError(
            f"{folder} is not a report bundle, and a report replaces its folder whole: name a "
            "new or empty folder (or one a report was written to)"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    # mkdir, not mkdtemp: the folder gets the umask's mode, as the published one should (0o700
    # would lock other users out of the bundle once it is swapped in)
    staging = folder.with_name(f".{folder.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    staging.mkdir()
    try:
        manifest = write_report(con, suite_id, staging, source)
        if folder.exists():
            swap(staging, folder)  # staging now holds the previous bundle
        else:
            os.rename(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return replace(manifest, out_dir=folder)


def swap(new: Path, published: Path) -> None:
    """Put the folder ``new`` at ``published`` and the previous folder at ``new``.

    One ``renameat2(RENAME_EXCHANGE)`` where the system has it: a reader of ``published`` sees
    the old folder or the new one at every instant. Elsewhere two renames, with an instant in
    between when ``published`` does not exist (never one that mixes both).
    """
    if not _exchange(new, published):
        parked = new.with_name(new.name + ".old")
        os.rename(published, parked)
        os.rename(new, published)
        os.rename(parked, new)


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` in one step; False when this system cannot (nothing moved)."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def report_zip(
    con: duckdb.DuckDBPyConnection, suite_id: str, source: str = "the snapshot"
) -> bytes:
    """``suite_id``'s bundle as a zip: every file under a folder named after the suite (``report``
    for an id that cannot name one), in sorted order, with a fixed time: the same bundle gives
    the same bytes."""
    top = suite_id if FOLDER_NAME.fullmatch(suite_id) else "report"
    with tempfile.TemporaryDirectory(prefix="tmlbench-report-") as scratch:
        root = Path(scratch)
        write_report(con, suite_id, root, source)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                entry = zipfile.ZipInfo(f"{top}/{path.relative_to(root).as_posix()}", ZIP_TIME)
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = 0o644 << 16  # rw-r--r--, whatever the scratch folder's
                archive.writestr(entry, path.read_bytes())
    return out.getvalue()
