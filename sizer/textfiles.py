"""Reading the user's text files (points, catalogs, disk classes, baselines): UTF-8 or one line
that names the file, never a traceback."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from sizer.errors import SizerError


def not_utf8(what: str, path: str | Path, exc: UnicodeDecodeError) -> SizerError:
    """The one line for a file that is no UTF-8 text: which file, and its first byte UTF-8 cannot have."""
    bad = bytes(exc.object[exc.start:exc.start + 1])
    return SizerError(f"{what} {path} is not UTF-8 text (it holds the byte 0x{bad.hex() or '??'} where UTF-8 "
                      "cannot have it): save it as UTF-8")


def read_text(path: str | Path, what: str) -> str:
    """The whole UTF-8 text of a file the user named; `what` names it in the one line of a file
    that cannot be read or is no UTF-8 text ("catalog", "baseline")."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(what, path, exc) from None
    except OSError as exc:
        raise SizerError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


@contextmanager
def open_text(path: str | Path, what: str) -> Iterator[IO[str]]:
    """A file the user named, open for reading as UTF-8 text a piece at a time (a large points file
    is streamed). Text that turns out not to be UTF-8 part-way gives the same one line as `read_text`."""
    try:
        fh = open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise SizerError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    with fh:
        try:
            yield fh
        except UnicodeDecodeError as exc:
            raise not_utf8(what, path, exc) from None
        except OSError as exc:
            raise SizerError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
