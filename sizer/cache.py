"""Cold for the dataset, warm for everything else.

Before each point the dataset's pages are evicted from the page cache, file by file
(posix_fadvise DONTNEED), so the point reads its data through the disk throttle as a fresh instance
would. Never a global drop_caches: that would also evict the framework's own libraries (about
1.6 GB for PyTorch with CUDA) and make their loading go through the throttle too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path
from typing import Iterator

_PAGE = os.sysconf("SC_PAGE_SIZE")


def dataset_files(path: str | Path) -> Iterator[Path]:
    """Regular files under `path` (or `path` itself when it is a file). The directory entries say
    which are files, without a stat of each (50,000 of them before every point of a GPU sweep)."""
    p = Path(path)
    if p.is_file():
        yield p
        return
    folders = [str(p)]
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif entry.is_file():
                yield Path(entry.path)


EVICT_THREADS = 4


def evict(path: str | Path, threads: int = EVICT_THREADS) -> dict[str, int]:
    """Drop the page-cache pages of every file under `path`. Dirty pages are written first (a
    just-generated dataset), since DONTNEED leaves dirty pages in memory.
    Returns {'files', 'bytes', 'skipped'}.

    The files are dropped on `threads` threads (the system calls let go of the interpreter): a sweep
    does this before every point, and one file at a time took about 80 us a file on the dev host,
    4 s for the 50,000 JPEGs of a GPU sweep."""
    paths = [str(f) for f in dataset_files(path)]
    threads = max(1, min(int(threads), len(paths)))
    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads, thread_name_prefix="evict") as pool:
            parts = pool.map(lambda part: [_evict_file(f) for f in part], [paths[i::threads] for i in range(threads)])
            sizes = [n for part in parts for n in part]
    else:
        sizes = [_evict_file(f) for f in paths]
    dropped = [n for n in sizes if n is not None]
    return {"files": len(dropped), "bytes": sum(dropped), "skipped": len(sizes) - len(dropped)}


def _evict_file(path: str) -> int | None:
    """Drop one file's pages; its size, or None when it could not be opened or advised."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOATIME) if _noatime_ok(Path(path)) else os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return os.fstat(fd).st_size
    except OSError:
        return None
    finally:
        os.close(fd)


def _noatime_ok(path: Path) -> bool:
    # O_NOATIME is allowed only to the file's owner (or root).
    try:
        return os.geteuid() == 0 or os.stat(path).st_uid == os.geteuid()
    except OSError:
        return False


_libc = None


def _mincore():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc.mmap.restype = ctypes.c_void_p
        _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    return _libc


def resident_bytes(path: str | Path) -> int:
    """Bytes of the files under `path` now in the page cache (mincore over a read-only mapping,
    which neither reads the file nor changes what is cached)."""
    libc = _mincore()
    total = 0
    for f in dataset_files(path):
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                continue
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                continue
            try:
                pages = (size + _PAGE - 1) // _PAGE
                vec = ctypes.create_string_buffer(pages)
                if libc.mincore(addr, size, vec) == 0:
                    resident = sum(b & 1 for b in vec.raw)
                    total += min(size, resident * _PAGE)
            finally:
                libc.munmap(addr, size)
        finally:
            os.close(fd)
    return total


def total_bytes(path: str | Path) -> int:
    return sum(f.stat().st_size for f in dataset_files(path))
