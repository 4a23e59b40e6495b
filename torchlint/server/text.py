"""Text as an editor addresses it: positions in a negotiated encoding, minimal edits.

LSP positions count lines split at `\\n`, `\\r\\n` and `\\r` only (as Python does, not at
form feeds or U+2028), and characters in UTF-16 code units unless the client agreed to
UTF-8 or UTF-32. The engine counts code points; `Lines` converts between the two.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
from dataclasses import dataclass

from torchlint.text.source import common_prefix, common_suffix, split_lines

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def units(text: str, encoding: str) -> int:
    """The length of `text` in the code units of `encoding`."""
    if encoding == UTF32:
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _body(line: str) -> str:
    return line.rstrip("\r\n")


class Lines:
    """A text's lines, and conversions between code-point offsets and LSP positions
    (0-based line, character in `encoding` units)."""

    def __init__(self, text: str, encoding: str = UTF16) -> None:
        self.text = text
        self.encoding = encoding
        self.lines = split_lines(text)
        self.starts = list(itertools.accumulate(map(len, self.lines), initial=0))

    def position(self, line: int, column: int) -> tuple[int, int]:
        """The LSP position of 0-based `line` and code-point `column`, clamped to the
        line's text (a position past the last line is the end of the text)."""
        if line >= len(self.lines):
            if not self.lines:
                return 0, 0
            last = self.lines[-1]
            if last != _body(last):  # the text ends with a newline: an empty last line
                return len(self.lines), 0
            return len(self.lines) - 1, units(last, self.encoding)
        body = _body(self.lines[max(line, 0)])
        return max(line, 0), units(body[: max(column, 0)], self.encoding)

    def at_offset(self, offset: int) -> tuple[int, int]:
        """The LSP position of a code-point offset into the text."""
        line = bisect.bisect_right(self.starts, offset) - 1
        if line >= len(self.lines):
            return self.position(line, 0)
        return self.position(line, offset - self.starts[line])


@dataclass(frozen=True)
class Replacement:
    """Replace the code points from `start` to `end` of the old text by `text`."""

    start: int
    end: int
    text: str


def minimal_edits(old: str, new: str) -> list[Replacement]:
    """Disjoint replacements, in order, that turn `old` into `new`: the changed runs of
    lines, each trimmed to the characters that differ (so an editor keeps its cursor,
    marks and folds everywhere else)."""
    if old == new:
        return []
    a, b = split_lines(old), split_lines(new)
    head = 0  # equal lines at the start and the end are never diffed
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    starts = list(itertools.accumulate(map(len, a), initial=0))
    matcher = difflib.SequenceMatcher(
        None, a[head : len(a) - tail], b[head : len(b) - tail], autojunk=False
    )
    out: list[Replacement] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start, end = starts[head + i1], starts[head + i2]
        before, after = old[start:end], "".join(b[head + j1 : head + j2])
        prefix = common_prefix(before, after)
        suffix = common_suffix(before, after, min(len(before), len(after)) - prefix)
        lo, hi, text = start + prefix, end - suffix, after[prefix : len(after) - suffix]
        if (
            lo > 0 and old[lo - 1 : lo + 1] == "\r\n"
        ):  # never between the two characters of a newline
            lo, text = lo - 1, "\r" + text
        if old[hi - 1 : hi + 1] == "\r\n":
            hi, text = hi + 1, text + "\n"
        out.append(Replacement(lo, hi, text))
    return out
