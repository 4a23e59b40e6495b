"""Reading and writing user files without ever losing or corrupting them.

Text is decoded as Python does (BOM, PEP 263 coding line, else UTF-8) with line
endings left untouched; it is written back in the same encoding, with the same BOM
and file mode, through a temporary file in the same directory and an atomic rename,
and only if the file on disk is still what was read.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python splits them (not at \\f or U+2028)."""
    return _LINE.findall(text)


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix, in a few slice comparisons (C speed)."""
    low, high = 0, min(len(a), len(b))
    while low < high:  # a[:low] == b[:low], and they differ within a[:high + 1]
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def common_suffix(a: str, b: str, limit: int | None = None) -> int:
    """The length of the longest common suffix, at most `limit`."""
    low, high = 0, min(len(a), len(b)) if limit is None else limit
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid : len(a) - low] == b[len(b) - mid : len(b) - low]:
            low = mid
        else:
            high = mid - 1
    return low


class SourceError(Exception):
    """A file that cannot be read, decoded or written; the message names the reason."""


@dataclass(frozen=True)
class SourceFile:
    path: Path
    raw: bytes
    text: str
    encoding: str  # "utf-8-sig" when the file starts with a BOM


def decode(raw: bytes) -> tuple[str, str]:
    """(text, encoding) of Python source bytes; raises SourceError."""
    if b"\0" in raw[:8192]:
        raise SourceError("binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise SourceError(
            f"bad encoding declaration: {exc.msg if hasattr(exc, 'msg') else exc}"
        ) from None
    try:
        codecs.lookup(encoding)
        text = raw.decode(encoding)
    except (LookupError, UnicodeDecodeError) as exc:
        reason = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise SourceError(f"cannot decode as {encoding}: {reason}") from None
    if encoding == "utf-8-sig":
        # tokenize reports the BOM through the encoding name; the text starts after it.
        text = text.removeprefix("\ufeff")
    return text, encoding


def irregular(mode: int) -> str | None:
    """What a file of this `st_mode` is when it is not a regular file; None when it is."""
    kinds = (
        (stat.S_ISREG, None),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


# Opening a FIFO for reading waits for a writer; without blocking, the file is seen for
# what it is (fstat) before anything is read.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def _require_regular(mode: int) -> None:
    kind = irregular(mode)
    if kind == "a directory":
        raise SourceError("is a directory")
    if kind is not None:
        raise SourceError(f"{kind}, not a regular file")


def read_bytes(path: Path) -> bytes:
    """The bytes of a regular file; SourceError for anything else, never a wait."""
    try:
        _require_regular(os.stat(path).st_mode)
        with open(os.open(path, _OPEN_FLAGS), "rb") as handle:
            _require_regular(os.fstat(handle.fileno()).st_mode)  # replaced in between
            return handle.read()
    except FileNotFoundError:
        raise SourceError("no such file") from None
    except PermissionError:
        raise SourceError("permission denied") from None
    except OSError as exc:
        raise SourceError(exc.strerror or str(exc)) from None


def read_source(path: Path) -> SourceFile:
    raw = read_bytes(path)
    text, encoding = decode(raw)
    return SourceFile(path, raw, text, encoding)


def encode(text: str, encoding: str) -> bytes:
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise SourceError(f"fixed text cannot be encoded as {encoding}: {exc.reason}") from None


def write_source(original: SourceFile, text: str) -> None:
    """Atomically replace the file with `text`, if the file still holds what was read."""
    data = encode(text, original.encoding)
    path = original.path
    if read_bytes(path) != original.raw:
        raise SourceError("file changed on disk while torchlint ran; not written")
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if not os.access(path, os.W_OK) or not mode & 0o222:  # root too respects a-w
            raise SourceError("permission denied (file is read-only); not written")
        target = path.resolve()  # write through a symlink, keeping the link
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".torchlint", dir=target.parent
        )
    except OSError as exc:
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise SourceError(f"cannot write: {exc.strerror or exc}") from None
