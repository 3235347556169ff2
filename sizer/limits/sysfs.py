"""Small helpers shared by the limit backends: cgroup files, group names, block devices, processes.

Every group sizer creates is named `sizer-<pid>-<label>-<n>` inside one `sizer` folder, so a person
(and `cleanup_leftovers`) can tell whose it is: the pid is the sizer process that made it.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import signal
import stat
import threading
import time
from pathlib import Path

PARENT = "sizer"
_NAME = re.compile(r"^sizer-(\d+)-")
_LABEL_CHARS = re.compile(r"[^a-z0-9.-]+")
_counter = itertools.count(1)
# Held while a group's `sizer` folder is set up and the group made in it, and while an empty one is
# removed: a parallel sweep (sizer.sweep.parallel) makes and removes groups from several threads.
TREE_LOCK = threading.RLock()


def group_name(label: str) -> str:
    """A fresh name for a group of this process: sizer-<pid>-<label>-<n>."""
    clean = _LABEL_CHARS.sub("-", label.lower()).strip("-")[:48] or "point"
    return f"sizer-{os.getpid()}-{clean}-{next(_counter)}"


def owner_pid(name: str) -> int | None:
    m = _NAME.match(name)
    return int(m.group(1)) if m else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purpose: it holds no cgroup and will never clean up.
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0] != "Z"
    except (OSError, IndexError):
        return False


def remove_orphaned_dirs(directory: Path, prefix: str) -> int:
    """Remove the folders `<prefix><pid>-*` in `directory` whose process no longer runs (a run
    killed outright leaves its scratch behind); returns how many went."""
    import shutil

    removed = 0
    for folder in directory.glob(f"{prefix}*-*"):
        pid = folder.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)) and folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def write_text(path: Path, value: str) -> None:
    """Write one value to a cgroup file; the error names the file and the value."""
    try:
        with open(path, "w") as fh:
            fh.write(value)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {value!r} to {path}: {exc.strerror}") from None


def group_pids(group_dir: Path) -> list[int]:
    text = read_text(group_dir / "cgroup.procs")
    return [int(p) for p in text.split()] if text else []


def kill_group_tasks(group_dir: Path, timeout_s: float = 5.0) -> int:
    """SIGKILL every process in a group sizer created (only sizer's own children ever join one) and
    wait until it is empty. Returns how many were killed."""
    killed = 0
    kill_file = group_dir / "cgroup.kill"  # cgroup v2, kernel 5.14+: kills the whole subtree at once
    deadline = time.monotonic() + timeout_s
    while True:
        pids = group_pids(group_dir)
        if not pids:
            return killed
        if kill_file.exists():
            try:
                write_text(kill_file, "1")
            except OSError:
                pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            return killed
        time.sleep(0.05)


def remove_dir(group_dir: Path, timeout_s: float = 5.0) -> bool:
    """rmdir a group after emptying it; True when it is gone. Retries while the kernel still
    counts exiting tasks (EBUSY for a moment after SIGKILL)."""
    if not group_dir.exists():
        return True
    kill_group_tasks(group_dir, timeout_s)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.rmdir(group_dir)
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or time.monotonic() > deadline:
                return False
            kill_group_tasks(group_dir, 1.0)
            time.sleep(0.05)


def remove_parent_if_empty(parent: Path) -> None:
    """Remove the shared `sizer` folder when no group is left in it (another sweep's groups keep it)."""
    try:
        with TREE_LOCK:
            if parent.is_dir() and not any(p.is_dir() for p in parent.iterdir()):
                os.rmdir(parent)
    except OSError:
        pass


def sizer_groups(parent: Path) -> list[Path]:
    if not parent.is_dir():
        return []
    return sorted(p for p in parent.iterdir() if p.is_dir() and owner_pid(p.name) is not None)


# ---------------------------------------------------------------- block devices
def _mount_source(path: Path) -> str | None:
    """The device a path's mount comes from (/dev/vda1), for file systems whose st_dev is virtual."""
    best, source = "", None
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    target = str(path.resolve())
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 2:
            continue
        mnt = fields[4]
        if (target == mnt or target.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, source = mnt, rfields[1]
    return source


def whole_disk(majmin: str) -> str:
    """Resolve a partition (254:1) to its whole disk (254:0): block throttles live on whole disks."""
    sys_dir = Path("/sys/dev/block") / majmin
    if (sys_dir / "partition").exists():
        parent_dev = read_text(sys_dir.resolve().parent / "dev")
        if parent_dev:
            return parent_dev
    return majmin


def block_device_for(path: str | Path) -> str | None:
    """'MAJ:MIN' of the whole block device holding `path`, or None where there is none (tmpfs)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    st = os.stat(p)
    majmin = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if (Path("/sys/dev/block") / majmin).exists():
        return whole_disk(majmin)
    source = _mount_source(p)  # overlay, btrfs subvolumes: look at the mount's source device
    if source and source.startswith("/dev/"):
        try:
            rdev = os.stat(source).st_rdev
        except OSError:
            return None
        if stat.S_ISBLK(os.stat(source).st_mode):
            return whole_disk(f"{os.major(rdev)}:{os.minor(rdev)}")
    return None


def device_name(majmin: str) -> str:
    """'254:0' -> 'vda' (for people); the number where sysfs does not say."""
    uevent = read_text(Path("/sys/dev/block") / majmin / "uevent")
    for line in uevent.splitlines():
        if line.startswith("DEVNAME="):
            return line.split("=", 1)[1]
    return majmin


# ---------------------------------------------------------------- cgroup mounts
def cgroup_mounts() -> tuple[dict[str, tuple[Path, str]], tuple[Path, str] | None]:
    """From /proc/self/mountinfo: v1 controller -> (mount point, hierarchy path mounted there), and
    the v2 (mount point, path) or None. The path matters inside containers that mount a subtree."""
    v1: dict[str, tuple[Path, str]] = {}
    v2: tuple[Path, str] | None = None
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return v1, v2
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        fstype, root, mnt, opts = rfields[0], fields[3], Path(fields[4]), rfields[2].split(",")
        if fstype == "cgroup2" and v2 is None:
            v2 = (mnt, root)
        elif fstype == "cgroup":
            for opt in opts:
                if opt in ("cpuset", "cpu", "cpuacct", "memory", "blkio"):
                    v1.setdefault(opt, (mnt, root))
    return v1, v2


def cgroup_dir(mount: tuple[Path, str], rel: str) -> Path:
    """Directory of cgroup `rel` (as /proc/self/cgroup names it) under a mount of `root`."""
    mnt, root = mount
    rel = rel if rel.startswith("/") else "/" + rel
    if root not in ("", "/") and (rel == root or rel.startswith(root.rstrip("/") + "/")):
        rel = rel[len(root.rstrip("/")) :] or "/"
    return mnt / rel.lstrip("/")


def own_cgroups() -> dict[str, str]:
    """controller -> this process's cgroup path ('' key for the v2 hierarchy)."""
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if controllers == "":
            out[""] = rel
        for c in controllers.split(","):
            if c:
                out[c] = rel
    return out


# ---------------------------------------------------------------- groups alive in this process
_live: dict[int, object] = {}
_atexit_installed = False


def track(group: object) -> None:
    """Remember a live group so that a crash (atexit) still removes it."""
    global _atexit_installed
    if not _atexit_installed:
        import atexit

        atexit.register(remove_all_live)
        _atexit_installed = True
    _live[id(group)] = group


def untrack(group: object) -> None:
    _live.pop(id(group), None)


def remove_all_live() -> None:
    for group in list(_live.values()):
        try:
            group.remove()  # type: ignore[attr-defined]
        except Exception:
            pass
