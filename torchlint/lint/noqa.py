"""Suppression comments: `# noqa`, `# noqa: TL201,TL202`, and file-level `# torchlint: noqa`.

A line comment suppresses a finding whose statement (logical line) starts or ends on
that line, so a multi-line call can carry its `# noqa` on its first or last line.
Comments are found with `tokenize`, so a `# noqa` inside a string never counts; files
that do not contain the text "noqa" are never tokenized. `Suppressions.unused` finds the
codes of a line comment that suppressed nothing (TL904, as ruff's RUF100), and
`Unused.rewrite` its line without them.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Set
from dataclasses import dataclass, field

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_FILE = re.compile(
    r"#\s*torchlint:\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I
)
ALL = "ALL"


def _codes(match: re.Match[str]) -> set[str]:
    codes = match.group("codes")
    return {c.upper() for c in re.split(r"[\s,]+", codes) if c} if codes else {ALL}


FIX_TITLE = "Remove unused `noqa` directive"


@dataclass(frozen=True)
class Directive:
    """A line's `# noqa` comment: where it is in its line (0-based character offsets,
    from `#` to its last code), and its codes as written (none: a blanket `# noqa`)."""

    start: int
    end: int
    codes: tuple[str, ...]

    def suppresses(self, code: str) -> bool:
        return not self.codes or any(c.upper() == code for c in self.codes)


@dataclass(frozen=True)
class Unused:
    """A directive naming codes that suppressed nothing, or a code twice."""

    line: int
    directive: Directive
    kept: tuple[str, ...]  # as written, in order
    unused: tuple[str, ...]
    duplicated: tuple[str, ...]

    @property
    def message(self) -> str:
        """As ruff says it: `Unused `noqa` directive (unused: `TL201`)`."""
        reasons = [
            f"{reason}: {', '.join(f'`{c}`' for c in codes)}"
            for reason, codes in (("unused", self.unused), ("duplicated", self.duplicated))
            if codes
        ]
        return f"Unused `noqa` directive ({'; '.join(reasons)})"

    def rewrite(self, line: str) -> str:
        """`line` (with its ending) with the kept codes only, or without the directive
        when none is kept (ruff's cases: the whole line when the comment is all it holds,
        a comment after it kept, the words after it kept as a comment)."""
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        start, end = self.directive.start, self.directive.end
        if self.kept:
            return f"{body[:start]}# noqa: {', '.join(self.kept)}{body[end:]}{ending}"
        before, after = body[:start].rstrip(), body[end:].lstrip()
        if not before and not after:
            return ""
        if not after:
            return before + ending
        if after.startswith("#"):
            return body[:start] + after + ending
        return body[: start + 2] + after + ending  # `# noqa: TL201 why` -> `# why`


@dataclass
class Suppressions:
    file: set[str] = field(default_factory=set)
    lines: dict[int, Directive] = field(default_factory=dict)
    logical: dict[int, tuple[int, int]] = field(default_factory=dict)  # line -> (first, last)

    def suppressed(self, code: str, line: int) -> bool:
        return self.exempt(code) or bool(self.suppressing(code, line))

    def exempt(self, code: str) -> bool:
        """The whole file is exempt from `code` (`# torchlint: noqa`)."""
        return ALL in self.file or code in self.file

    def suppressing(self, code: str, line: int) -> list[int]:
        """The lines whose comment suppresses `code` found on `line`: that line, and the
        first and last of its statement."""
        if not self.lines:
            return []
        first, last = self.logical.get(line, (line, line))
        return [
            candidate
            for candidate in {line, first, last}
            if (directive := self.lines.get(candidate)) and directive.suppresses(code)
        ]

    def unused(self, used: Set[tuple[int, str]], judged: Set[str]) -> list[Unused]:
        """The directives naming a code of `judged` that suppressed nothing (`used`: the
        (line, code) of every suppression), or naming one twice. Other codes (another
        tool's, a rule's not judged) and blanket comments are left alone."""
        found = []
        for line, directive in sorted(self.lines.items()):
            kept: list[str] = []
            unused: list[str] = []
            duplicated: list[str] = []
            seen: set[str] = set()
            for written in directive.codes:
                code = written.upper()
                if code in judged and code in seen:
                    duplicated.append(written)
                elif code in judged and (line, code) not in used:
                    unused.append(written)
                else:
                    kept.append(written)
                seen.add(code)
            if unused or duplicated:
                found.append(Unused(line, directive, tuple(kept), tuple(unused), tuple(duplicated)))
        return found


class _Statements:
    """The lines of each logical statement, from a token stream: `feed` every token; the
    one that ends a statement returns its (first line, last line)."""

    _NOT_CODE = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)

    def __init__(self) -> None:
        self.start: int | None = None

    def feed(self, tok: tokenize.TokenInfo) -> tuple[int, int] | None:
        if self.start is None and tok.type not in self._NOT_CODE:
            self.start = tok.start[0]
        if tok.type != tokenize.NEWLINE or self.start is None:
            return None
        span, self.start = (self.start, tok.start[0]), None
        return span


def parse_suppressions(source: str) -> Suppressions:
    result = Suppressions()
    if "noqa" not in source and "NOQA" not in source:
        return result
    statements = _Statements()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            span = statements.feed(tok)
            if span is not None:
                for line in range(span[0], span[1] + 1):
                    result.logical[line] = span
            if tok.type == tokenize.COMMENT:
                file_match = _FILE.search(tok.string)
                if file_match:
                    result.file |= _codes(file_match)
                    continue
                match = _NOQA.search(tok.string)
                if match:
                    codes = match.group("codes")
                    result.lines[tok.start[0]] = Directive(
                        tok.start[1] + match.start(),
                        tok.start[1] + match.end(),
                        tuple(re.split(r"[\s,]+", codes)) if codes else (),
                    )
    except (tokenize.TokenError, SyntaxError):
        pass  # the parser reports real syntax errors; keep what was read
    return result


def add_noqa(source: str, wanted: dict[int, set[str]]) -> tuple[str, int]:
    """`source` with `# noqa: CODES` comments that suppress `wanted` (line -> codes), and
    how many lines changed. Each comment goes on the finding's line, or on the last line
    of its statement when that line ends inside a string; codes join an existing `# noqa:`
    (other tools' codes kept), a bare `# noqa` already covers everything. The one
    implementation behind `check --add-noqa` and the editor's "Ignore for this line"."""
    if not wanted:
        return source, 0
    lines = source.splitlines(keepends=True)
    comments: dict[int, tokenize.TokenInfo] = {}
    in_string: set[int] = set()  # lines whose end is inside a (multi-line) string
    logical: dict[int, int] = {}  # line -> last line of its statement
    statements = _Statements()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                comments[tok.start[0]] = tok
            elif tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                in_string.update(range(tok.start[0], tok.end[0]))
            span = statements.feed(tok)
            if span is not None:
                for line in range(span[0], span[1] + 1):
                    logical[line] = span[1]
    except (tokenize.TokenError, SyntaxError):
        return source, 0  # only ever asked of files that parse
    targets: dict[int, set[str]] = {}
    for line, codes in wanted.items():
        target = logical.get(line, line) if line in in_string else line
        targets.setdefault(target, set()).update(codes)
    changed = 0
    for line, codes in sorted(targets.items()):
        if not 1 <= line <= len(lines):
            continue
        text = lines[line - 1]
        body = text.rstrip("\r\n")
        ending = text[len(body) :]
        comment = comments.get(line)
        match = _NOQA.search(comment.string) if comment is not None else None
        if match is not None and match.group("codes") is None:
            continue  # a bare suppression comment covers every code already
        if match is not None:
            present = _codes(match)
            missing = sorted(codes - present)
            if not missing:
                continue
            assert comment is not None
            joined = ", ".join([*sorted(present), *missing])
            start = comment.start[1] + match.start()
            end = comment.start[1] + match.end()
            body = f"{body[:start]}# noqa: {joined}{body[end:]}"
        else:
            body = f"{body.rstrip()}  # noqa: {', '.join(sorted(codes))}"
        lines[line - 1] = body + (ending or ("\n" if line < len(lines) else ""))
        changed += 1
    return "".join(lines), changed
