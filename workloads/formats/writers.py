"""Writers of the packed formats, as the frameworks' own tools write them: NVCaffe's
convert_imageset (LMDB), MXNet's im2rec (RecordIO) and WebDataset (tar shards). Standard library
only, plus lmdb (imported when used) and PIL (only to read a JPEG's dimensions when writing LMDB).
"""

from __future__ import annotations

import io
import os
import tarfile
from abc import ABC, abstractmethod
from collections.abc import Iterable
from pathlib import Path

from workloads.formats.readers import close_lmdb_envs
from workloads.formats.records import encode_datum, pack_irheader, recordio_frame


def _jpeg_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:  # reads the header only
        return img.size


class _Writer(ABC):
    """Context-managed writer of (key, JPEG bytes, label) records."""

    def __init__(self, fsync: bool = False):
        self.fsync = fsync
        self.count = 0

    @abstractmethod
    def write(self, key: str, data: bytes, label: int) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def outputs(self) -> list[Path]:
        """The paths this writer produced (files or directories)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LmdbWriter(_Writer):
    """An LMDB environment (directory with data.mdb) as convert_imageset writes it."""

    COMMIT_EVERY = 1000  # convert_imageset commits every 1000 records

    def __init__(self, path: str | os.PathLike, fsync: bool = False, map_size: int = 1 << 40):
        super().__init__(fsync)
        import lmdb

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        close_lmdb_envs(self.path)  # a cached reader of this path would block opening it here
        # sync=False while writing; the environment is flushed once at close (when asked) instead.
        self._env: lmdb.Environment | None = lmdb.open(
            str(self.path), map_size=map_size, subdir=True, sync=False, metasync=False
        )
        self._txn = self._env.begin(write=True)

    def write(self, key: str, data: bytes, label: int) -> None:
        width, height = _jpeg_size(data)
        lmdb_key = f"{self.count:08d}_{key}".encode()
        self._txn.put(lmdb_key, encode_datum(data, label, 3, height, width, True))
        self.count += 1
        if self.count % self.COMMIT_EVERY == 0:
            self._txn.commit()
            assert self._env is not None  # after close() the put() above already failed on the committed txn
            self._txn = self._env.begin(write=True)

    def close(self) -> None:
        if self._env is None:
            return
        self._txn.commit()
        if self.fsync:
            self._env.sync(True)
        self._env.close()
        self._env = None

    def outputs(self) -> list[Path]:
        return [self.path]


class RecordIOWriter(_Writer):
    """`<prefix>.rec`, `<prefix>.idx` and `<prefix>.lst` as im2rec writes them (pure Python)."""

    def __init__(self, prefix: str | os.PathLike, fsync: bool = False):
        super().__init__(fsync)
        self.prefix = Path(prefix)
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        self.rec_path = self.prefix.with_name(self.prefix.name + ".rec")
        self.idx_path = self.prefix.with_name(self.prefix.name + ".idx")
        self.lst_path = self.prefix.with_name(self.prefix.name + ".lst")
        self._rec: io.BufferedWriter | None = open(self.rec_path, "wb")
        self._idx = open(self.idx_path, "w")
        self._lst = open(self.lst_path, "w")

    def write(self, key: str, data: bytes, label: int, record_id: int | None = None) -> None:
        rid = self.count if record_id is None else int(record_id)
        assert self._rec is not None, "write() after close()"
        pos = self._rec.tell()
        self._rec.write(recordio_frame(pack_irheader(data, label, rid)))
        self._idx.write(f"{rid}\t{pos}\n")
        self._lst.write(f"{rid}\t{float(label):f}\t{key}\n")
        self.count += 1

    def close(self) -> None:
        if self._rec is None:
            return
        for fh in (self._rec, self._idx, self._lst):
            fh.flush()
            if self.fsync:
                os.fsync(fh.fileno())
            fh.close()
        self._rec = None

    def outputs(self) -> list[Path]:
        return [self.rec_path, self.idx_path, self.lst_path]


class TarShardWriter(_Writer):
    """WebDataset shards `<dir>/<prefix>-000000.tar`, ... of at most `maxcount` samples each."""

    def __init__(self, directory: str | os.PathLike, prefix: str = "train", maxcount: int = 1000, fsync: bool = False):
        super().__init__(fsync)
        if maxcount < 1:
            raise ValueError("maxcount must be >= 1")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.maxcount = maxcount
        self.shards: list[Path] = []
        self._tar: tarfile.TarFile | None = None

    def _next_shard(self) -> None:
        self._close_shard()
        path = self.directory / f"{self.prefix}-{len(self.shards):06d}.tar"
        self.shards.append(path)
        self._tar = tarfile.open(path, "w", format=tarfile.USTAR_FORMAT)

    def _close_shard(self) -> None:
        if self._tar is not None:
            self._tar.close()
            if self.fsync:
                _fsync_path(self.shards[-1])
            self._tar = None

    def _add(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        info.mtime = 0  # reproducible shards
        assert self._tar is not None  # write() opens a shard before adding to it
        self._tar.addfile(info, io.BytesIO(data))

    def write(self, key: str, data: bytes, label: int) -> None:
        if self._tar is None or self.count % self.maxcount == 0:
            self._next_shard()
        # WebDataset splits a member name at its first dot into key and extension.
        sample_key = key.rsplit(".", 1)[0].replace(".", "_").replace("/", "_")
        self._add(f"{sample_key}.jpg", data)
        self._add(f"{sample_key}.cls", str(int(label)).encode())
        self.count += 1

    def close(self) -> None:
        self._close_shard()
        if self.fsync:
            _fsync_path(self.directory)

    def outputs(self) -> list[Path]:
        return [self.directory]


def open_writer(fmt: str, root: str | os.PathLike, split: str = "train", fsync: bool = False, maxcount: int = 1000) -> _Writer:
    """A writer of `fmt` placing its output at `packed_paths(root, fmt, split)`."""
    root = Path(root)
    if fmt == "lmdb":
        return LmdbWriter(root / "lmdb" / split, fsync=fsync)
    if fmt == "rec":
        return RecordIOWriter(root / "rec" / split, fsync=fsync)
    if fmt == "tar":
        return TarShardWriter(root / "tar" / split, prefix=split, maxcount=maxcount, fsync=fsync)
    raise ValueError(f"unknown packed format {fmt!r} (known: lmdb, rec, tar)")


def pack_records(records: Iterable[tuple[str, bytes, int]], writer: _Writer) -> int:
    """Write (key, JPEG bytes, label) records with `writer`, then close it; returns the count."""
    with writer:
        for key, data, label in records:
            writer.write(key, data, label)
    return writer.count
