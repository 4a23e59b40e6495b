"""A notebook's JSON text, edited in place: the "source" values of the cells that changed
are spliced into the original text, formatted as the original value was (list of lines
or one string, same indentation, same ASCII escaping), so that the indentation, key
order, metadata and outputs stay byte-for-byte what they were."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # (typeshed omits it)

_WS = re.compile(r"[ \t\n\r]*")
_NON_ASCII_ESCAPE = re.compile(
    r"\\u(?:00[89a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]|[1-9a-fA-F][0-9a-fA-F]{2})"
)


@dataclass(frozen=True)
class Style:
    newline: str  # the file's line ending
    unit: str | None  # one level of indentation; None when the JSON is on one line
    ensure_ascii: bool

    @classmethod
    def detect(cls, text: str) -> Style:
        m = re.match(r"\s*\{(\r?\n)([ \t]*)\"", text)
        non_ascii = any(ord(c) > 127 for c in text)
        ensure_ascii = not non_ascii and _NON_ASCII_ESCAPE.search(text) is not None
        if m is None:
            return cls("\n", None, ensure_ascii)
        return cls(m.group(1), m.group(2), ensure_ascii)


def format_source(new: str, old: str, text: str, key_start: int, style: Style) -> str:
    """`new` as a JSON value laid out like `old` (a string, or a list of lines)."""

    def dumps(s: str) -> str:
        return json.dumps(s, ensure_ascii=style.ensure_ascii)

    if not old.startswith("["):
        return dumps(new)
    items = [dumps(line) for line in _jupyter_lines(new)]
    if not items:
        return "[]"
    opening, separator, closing = _list_layout(old, text, key_start, style)
    return "[" + opening + separator.join(items) + closing + "]"


def _jupyter_lines(text: str) -> list[str]:
    """Split as Jupyter stores sources: every line keeps its "\\n"; the last may have none."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _list_layout(old: str, text: str, key_start: int, style: Style) -> tuple[str, str, str]:
    """(after "[", between items, before "]") as the original list has them."""
    opening = _WS.match(old, 1).group()  # type: ignore[union-attr]
    first = len("[") + len(opening)
    if old[first] != "]":
        closing = re.search(r"\s*\]\Z", old).group()[:-1]  # type: ignore[union-attr]
        _, end = json.JSONDecoder().raw_decode(old, first)
        after = _WS.match(old, end).end()  # type: ignore[union-attr]
        if old[after] == ",":
            between = "," + _WS.match(old, after + 1).group()  # type: ignore[union-attr]
        else:
            between = "," + opening if "\n" in opening else ", "
        return opening, between, closing
    line_start = max(text.rfind("\n", 0, key_start), text.rfind("\r", 0, key_start)) + 1
    indent = text[line_start:key_start]
    if style.unit is None or indent.strip():
        return "", ", ", ""
    inner = style.newline + indent + style.unit
    return inner, "," + inner, style.newline + indent


def source_spans(text: str) -> dict[int, tuple[int, int, int]]:
    """Cell number -> (start, end, key start) of its "source" value in the JSON text."""
    spans: dict[int, tuple[int, int, int]] = {}
    i = _WS.match(text).end()  # type: ignore[union-attr]
    for key, _, start, _ in _members(text, i):
        if key == "cells" and text[start] == "[":
            for number, (cell_start, _) in enumerate(_elements(text, start), 1):
                if text[cell_start] != "{":
                    continue
                for cell_key, key_start, value_start, value_end in _members(text, cell_start):
                    if cell_key == "source":
                        spans[number] = (value_start, value_end, key_start)
    return spans


_DECODER = json.JSONDecoder()


def _members(text: str, i: int) -> Iterator[tuple[str, int, int, int]]:
    """(key, key start, value start, value end) of the object starting at `i`."""
    i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
    if text[i] == "}":
        return
    while True:
        key_start = i
        key, i = scanstring(text, i + 1)
        i = _WS.match(text, i).end()  # type: ignore[union-attr]
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]  # past ":"
        _, end = _DECODER.raw_decode(text, i)
        yield key, key_start, i, end
        i = _WS.match(text, end).end()  # type: ignore[union-attr]
        if text[i] != ",":
            return
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]


def _elements(text: str, i: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each value of the array starting at `i`."""
    i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
    if text[i] == "]":
        return
    while True:
        _, end = _DECODER.raw_decode(text, i)
        yield i, end
        i = _WS.match(text, end).end()  # type: ignore[union-attr]
        if text[i] != ",":
            return
        i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
