"""Suppression comments: `# noqa`, `# noqa: TL201,TL202`, and file-level `# torchlint: noqa`.

A line comment suppresses a finding whose statement (logical line) starts or ends on
that line, so a multi-line call can carry its `# noqa` on its first or last line.
Comments are found with `tokenize`, so a `# noqa` inside a string never counts; files
that do not contain the text "noqa" are never tokenized.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_FILE = re.compile(
    r"#\s*torchlint:\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I
)
ALL = "ALL"


def _codes(match: re.Match[str]) -> set[str]:
    codes = match.group("codes")
    return {c.upper() for c in re.split(r"[\s,]+", codes) if c} if codes else {ALL}


@dataclass
class Suppressions:
    file: set[str] = field(default_factory=set)
    lines: dict[int, set[str]] = field(default_factory=dict)  # line -> codes (or ALL)
    logical: dict[int, tuple[int, int]] = field(default_factory=dict)  # line -> (first, last)

    def suppressed(self, code: str, line: int) -> bool:
        if ALL in self.file or code in self.file:
            return True
        if not self.lines:
            return False
        first, last = self.logical.get(line, (line, line))
        for candidate in {line, first, last}:
            codes = self.lines.get(candidate)
            if codes and (ALL in codes or code in codes):
                return True
        return False


def parse_suppressions(source: str) -> Suppressions:
    result = Suppressions()
    if "noqa" not in source and "NOQA" not in source:
        return result
    start_line = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if start_line is None and tok.type not in (
                tokenize.NL,
                tokenize.COMMENT,
                tokenize.INDENT,
                tokenize.DEDENT,
            ):
                start_line = tok.start[0]
            if tok.type == tokenize.COMMENT:
                file_match = _FILE.search(tok.string)
                if file_match:
                    result.file |= _codes(file_match)
                    continue
                match = _NOQA.search(tok.string)
                if match:
                    result.lines.setdefault(tok.start[0], set()).update(_codes(match))
            elif tok.type == tokenize.NEWLINE and start_line is not None:
                for line in range(start_line, tok.start[0] + 1):
                    result.logical[line] = (start_line, tok.start[0])
                start_line = None
    except (tokenize.TokenError, SyntaxError):
        pass  # the parser reports real syntax errors; keep what was read
    return result
