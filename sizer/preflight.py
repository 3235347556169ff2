"""Where sizer will write, checked before any work: an output folder (`--out`) and a results store
(`--store`) must be writable, of the right kind, and on a disk with room for what goes there.

Checked before the host lock and the host probe, so a sweep refused for its outputs has measured
nothing; the checks only look (a dry run changes nothing on the host).
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from pathlib import Path

from sizer.errors import SizerError
from sizer.store_schema import SCHEMA_VERSION
from sizer.units import format_bytes

# What the outputs take at most, with room to spare: a report of a few hundred points measured
# 0.6 MB (report.html), 0.3 MB (results.json) and 2.5 MB (the store); a point's raw steps are a
# few kB. The check wants this much free before it starts.
BASE_BYTES = 8 * 2**20
PER_POINT_BYTES = 256 * 2**10
SQLITE_MAGIC = b"SQLite format 3\x00"


def outputs_bytes(points: int) -> int:
    """The free space a sweep or a report of `points` points wants for its outputs."""
    return BASE_BYTES + PER_POINT_BYTES * max(0, points)


def _existing_anchor(path: Path, option: str) -> Path:
    """The nearest folder that exists at or above `path`: where a missing one would be made."""
    anchor = path
    while not anchor.exists():
        if anchor.parent == anchor:
            break
        anchor = anchor.parent
    if not anchor.is_dir():
        raise SizerError(f"{option} {path}: {anchor} is a file, so no folder can be made there")
    return anchor


def _check_writable(anchor: Path, path: Path, option: str) -> None:
    """`anchor` (an existing folder) takes new files: on a read-only mount, and by its permissions."""
    try:
        read_only = bool(os.statvfs(anchor).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        raise SizerError(f"{option} {path}: {anchor} is on a read-only file system")
    if not os.access(anchor, os.W_OK | os.X_OK):
        raise SizerError(f"{option} {path}: {anchor} is not writable")


def _check_room(anchor: Path, path: Path, option: str, need: int) -> None:
    try:
        free = shutil.disk_usage(anchor).free
    except OSError:
        return  # the write itself will say, in one line
    if free < need:
        raise SizerError(f"{option} {path}: {format_bytes(free)} free on its disk, the outputs want "
                         f"{format_bytes(need)}: free some space or give another {option}")


def check_out_folder(path: Path, points: int = 0, option: str = "--out") -> None:
    """A folder for report.html, results.json and points.csv: a folder (or none yet, under a folder
    sizer may write in), writable, with room for the outputs of `points` points."""
    path = path.expanduser()
    if path.exists() and not path.is_dir():
        raise SizerError(f"{option} {path} is a file, not a folder")
    anchor = _existing_anchor(path, option)
    _check_writable(anchor, path, option)
    _check_room(anchor, path, option, outputs_bytes(points))


def check_store_file(path: Path, points: int = 0, option: str = "--store") -> None:
    """A results store to open or make: a sizer store this sizer reads (not a folder, not another
    kind of file, not a newer schema) in a writable folder, with room for `points` more points."""
    path = path.expanduser()
    if path.is_dir():
        raise SizerError(f"{option} {path} is a folder, not a store file (give a file, e.g. {path / 'sizer.sqlite'})")
    anchor = _existing_anchor(path.parent, option)
    _check_writable(anchor, path, option)
    if path.exists():
        _check_store_kind(path, option)
    _check_room(anchor, path, option, outputs_bytes(points))


def _check_store_kind(path: Path, option: str) -> None:
    """An existing store file: SQLite, with sizer's tables, of a schema this sizer reads. Read only."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise SizerError(f"{option} {path}: cannot read it: {exc.strerror}") from None
    if not head:
        return  # an empty file: SQLite makes a new store in it
    if head != SQLITE_MAGIC:
        raise SizerError(f"{option} {path} is not a sizer store (not an SQLite file)")
    version = _schema_version(path, option)
    if version is not None and version > SCHEMA_VERSION:
        raise SizerError(f"{option} {path} was written by a newer sizer (store schema {version}; this one reads up "
                         f"to {SCHEMA_VERSION}): upgrade sizer or give another {option}")


def _schema_version(path: Path, option: str) -> int | None:
    """The store's schema version, read without writing; None where SQLite cannot tell without
    writing (opening it for real then says what is wrong)."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return None
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            raise SizerError(f"{option} {path} is an SQLite file but not a sizer store")
        if "meta" not in tables:
            return 0
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc) or "malformed" in str(exc):
            raise SizerError(f"{option} {path} is not a sizer store ({exc})") from None
        return None
    except ValueError:
        raise SizerError(f"{option} {path}: its schema version is not a number") from None
    finally:
        conn.close()


def write_failure(path: Path, exc: OSError) -> SizerError:
    """The one line for a write that failed: the file, and why (a full disk, a read-only one)."""
    why = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
           errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied"}.get(
        exc.errno or 0, exc.strerror or str(exc))
    return SizerError(f"cannot write {path}: {why}")
