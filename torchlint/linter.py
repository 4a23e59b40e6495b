"""One file: parse once, build the model, run every selected rule, fix to a fixpoint.

Positions are resolved only for files that have something to report: a full
`PositionProvider` pass costs about four traversals, and most files report nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import os
import queue
import re
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import libcst as cst
from libcst.metadata import CodeRange

from torchlint.fixes import Applicability, select_compatible, text_edits
from torchlint.gate import Gate, apply_checked, later
from torchlint.noqa import parse_suppressions
from torchlint.positions import Layout, NodePositions
from torchlint.results import (
    ANALYSIS_ERROR,
    INVALID_SYNTAX,
    FileError,
    FixRecord,
    Impact,
    Violation,
)
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import build
from torchlint.semantic.exports import summarize
from torchlint.semantic.external import Environment
from torchlint.settings import Settings

if TYPE_CHECKING:
    from torchlint.incremental import Buffer

MAX_FIX_PASSES = 16
# Which findings get their fix's text edits: all, none, or those of these keys
# (code, line, column: the finding's start, 1-based), as an editor asks for one.
EditsWanted = bool | Set[tuple[str, int, int]]
# Told of a rule that raised (its code, the exception), so that the other rules' findings
# still count; without one, the exception propagates.
RuleErrorHandler = Callable[[str, Exception], None]


class LintError(Exception):
    """The file cannot be analysed (syntax error, too deeply nested...)."""

    def file_error(self, cell: int | None = None) -> FileError:
        """This error as the record reports show (in a notebook's `cell`)."""
        return FileError(ANALYSIS_ERROR, str(self), cell=cell)


class InvalidSyntax(LintError):
    """A syntax error, at one 1-based line and column."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(f"syntax error at {line}:{column}: {message}")
        self.line, self.column, self.message = line, column, message

    def file_error(self, cell: int | None = None) -> FileError:
        return FileError(INVALID_SYNTAX, self.message, self.line, self.column, cell)

    @classmethod
    def from_compile(cls, exc: SyntaxError | ValueError, source: str) -> InvalidSyntax:
        """What `compile(source, ...)` raised (ValueError: null bytes, before Python 3.12)."""
        message = str(exc.msg) if isinstance(exc, SyntaxError) else str(exc)
        line = getattr(exc, "lineno", None)
        if line is not None:
            return cls(line, getattr(exc, "offset", None) or 1, message)
        before = source[: source.find("\0")] if "\0" in source else ""
        return cls(before.count("\n") + 1, len(before) - before.rfind("\n"), message)


@dataclass
class FixOutcome:
    text: str
    fixed: list[str] = field(default_factory=list)  # codes of the applied fixes
    remaining: list[Violation] = field(default_factory=list)
    # Codes of applied fixes of findings that were not there to report before other
    # fixes (as many per code as were applied beyond the findings first reported).
    later: list[str] = field(default_factory=list)


# A finding whose fix the gate refused, across passes: its code, its node's code, the
# fix's title.
FindingKey = tuple[str, str, str]


@dataclass
class _Pass:
    text: str
    fixed: list[str]  # codes of the fixes applied
    fixable: Counter[str]  # the fixable findings of the text before the pass, by code
    remaining: list[Violation] | None  # nothing applied: the findings that remain


# libcst's native parser recurses once per nesting level: a few thousand levels overflow
# an 8 MB stack (1 MB on Windows) and kill the process, and its time grows with the square
# of the depth. So libcst parses on a thread with a large stack (one long-lived thread: a
# new one per file costs 10% more CPU), and text that may nest deeper than it parses
# quickly is first given to CPython's parser, which refuses what CPython cannot compile
# (a tenth of the libcst parse, so only where needed: `_may_nest_deeply`).
DEEP_CHARS = 4000  # libcst: about 2 s for 4,000 levels (one character each, at least)
P = ParamSpec("P")
R = TypeVar("R")
PARSE_STACK_BYTES = 512 * 1024 * 1024  # reserved address space; only what is used is paid
TOO_DEEP = "expression nested too deeply to analyse"


class _ParserThread:
    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.pid = 0

    def parse(self, source: str) -> cst.Module:
        if self.thread is None or self.pid != os.getpid():  # none yet, or left in the parent
            self._start()
        if self.thread is None:  # no thread with that stack here: the caller's stack
            return cst.parse_module(source)
        box: dict[str, Any] = {}
        done = threading.Event()
        self.jobs.put((source, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["module"]

    def _start(self) -> None:
        self.jobs, self.pid, self.thread = queue.SimpleQueue(), os.getpid(), None
        for size in (PARSE_STACK_BYTES, PARSE_STACK_BYTES // 8):
            try:
                previous = threading.stack_size(size)
            except (ValueError, RuntimeError):  # a platform that refuses the size
                continue
            try:
                thread = threading.Thread(
                    target=self._serve, args=(self.jobs,), name="torchlint-parse", daemon=True
                )
                thread.start()
            except RuntimeError:  # address space limited (ulimit -v)
                continue
            finally:
                threading.stack_size(previous)
            self.thread = thread
            return

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[Any]) -> None:
        while (job := jobs.get()) is not None:
            source, box, done = job
            try:
                box["module"] = cst.parse_module(source)
            except BaseException as exc:  # re-raised on the calling thread
                box["error"] = exc
            done.set()

    def stop(self) -> None:
        """End the thread (before a fork: a process that forks should have no threads)."""
        if self.thread is not None and self.pid == os.getpid():
            self.jobs.put(None)
            self.thread.join()
        self.thread = None


parser_thread = _ParserThread()


def _may_nest_deeply(source: str) -> bool:
    """Can this text hold DEEP_CHARS levels of nesting? Each level takes a character of one
    statement, and statements hardly ever hold a blank line: the longest stretch without
    one bounds the depth (a few C-speed scans). Text big enough to exhaust even the large
    stack is always checked."""
    if len(source) < DEEP_CHARS:
        return False
    if len(source) > PARSE_STACK_BYTES // 2048:
        return True
    text = source.replace("\r\n", "\n") if "\r" in source else source
    return max(map(len, text.split("\n\n"))) >= DEEP_CHARS


def parse(source: str, path: str = "<string>") -> cst.Module:
    """libcst's tree of `source`. A syntax error is reported where CPython reports it
    when CPython refuses the text too, else (CPython accepts it) where libcst does."""
    if _may_nest_deeply(source):
        _cpython_refusal(source, path)  # raises for text too deep to analyse
    try:
        return parser_thread.parse(source)
    except cst.ParserSyntaxError as exc:
        raise _cpython_refusal(source, path) or _libcst_refusal(exc) from None
    except RecursionError:
        raise LintError(TOO_DEEP) from None


def check_syntax(source: str, path: str = "<string>") -> None:
    """Raise `InvalidSyntax` for text that does not parse, at C speed where it does (the
    check for files no rule needs to read); `TooLarge` for text too large to check. Text
    CPython refuses is given to libcst, which accepts syntax newer than this Python, when
    libcst's tree fits in memory (MAX_TOKENS); above that, CPython's error stands."""
    _refuse_unchecked(source)
    _check_syntax(source, path)


def _check_syntax(source: str, path: str) -> None:
    refusal = _cpython_refusal(source, path)
    if refusal is None:
        return
    if len(source) > MAX_TOKENS and _tokens(source, MAX_TOKENS) > MAX_TOKENS:
        raise refusal
    parse(source, path)


def _cpython_refusal(source: str, path: str) -> InvalidSyntax | None:
    """CPython's syntax error in `source`, if any; LintError for text too deep for it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings are the user's compiler's to print
        try:
            compile(source, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except (RecursionError, MemoryError):
            raise LintError(f"{TOO_DEEP} (Python itself refuses to compile it)") from None
        except (SyntaxError, ValueError) as exc:
            error = InvalidSyntax.from_compile(exc, source)
            if "too many" in error.message:  # nested parentheses, levels of indentation
                raise LintError(f"{TOO_DEEP} ({error.message})") from None
            return error
    return None


_LIBCST_POSITION = re.compile(r"parser error: error at (\d+):(\d+): ", re.DOTALL)


def _libcst_refusal(exc: cst.ParserSyntaxError) -> InvalidSyntax:
    """libcst's error, at the one position its message holds (its columns are 0-based)."""
    m = _LIBCST_POSITION.match(exc.message)
    if m is not None:
        return InvalidSyntax(int(m.group(1)), int(m.group(2)) + 1, exc.message[m.end() :])
    message = exc.message.removeprefix("tokenizer error: ")
    return InvalidSyntax(exc.raw_line, exc.raw_column + 1, message)


# libcst's tree takes 2 to 4 KB per token of the text (measured on PyTorch's sources;
# 3.6 KB at worst, in tables of numbers), so a process's peak memory is bounded by its
# largest analysed file: about 45 MB + MAX_TOKENS x 3.6 KB x 1.25 (model, positions).
# A file above that is checked for syntax only (by CPython alone: libcst would need the
# memory) and reported with a warning. CPython's own parser needs about 0.5 KB and 2 us
# a token (measured on dense tables of numbers: 1.9 GB and 10 s for 4 million), so a
# file above MAX_SYNTAX_TOKENS is not even checked for syntax (50 MB of generated data
# would take 8 GB and a minute), with a warning. A token takes a character at least, so
# shorter text is never counted, and counting stops at the limit it is counted for.
MAX_TOKENS = 75_000
MAX_SYNTAX_TOKENS = 1_000_000
_TOKEN = re.compile(
    r"""(?s)[rRbBuUfF]{0,2}(?:'''(?:\\.|[^\\])*?'''|"{3}(?:\\.|[^\\])*?"{3}"""
    r"""|'(?:\\.|[^'\\\r\n])*'|"(?:\\.|[^"\\\r\n])*")|#[^\r\n]*|\w+|[^\w\s]"""
)


class TooLarge(LintError):
    """A file too large to analyse in bounded memory: checked for syntax only, or (above
    MAX_SYNTAX_TOKENS) not at all."""


def _tokens(source: str, limit: int) -> int:
    """The tokens of `source` (a string or a comment counts one), counted up to `limit` + 1."""
    return _TOKEN.subn("", source, count=limit + 1)[1]


def _refuse_unchecked(source: str) -> None:
    """Raise `TooLarge` for text too large for even CPython's parser (MAX_SYNTAX_TOKENS)."""
    if len(source) > MAX_SYNTAX_TOKENS and _tokens(source, MAX_SYNTAX_TOKENS) > MAX_SYNTAX_TOKENS:
        raise TooLarge(
            f"too large to check (over {MAX_SYNTAX_TOKENS:,} tokens, {len(source) / 1e6:.1f} "
            "million characters); not analysed, nor checked for syntax"
        )


def _check_size(source: str, path: str) -> None:
    """Raise `TooLarge` (after CPython's syntax check) for text above MAX_TOKENS."""
    if len(source) <= MAX_TOKENS:
        return
    tokens = _tokens(source, MAX_TOKENS)
    if tokens > MAX_TOKENS:
        refusal = _cpython_refusal(source, path)
        if refusal is not None:
            raise refusal
        raise TooLarge(
            f"too large to analyse (over {MAX_TOKENS:,} tokens); checked for syntax only"
        )


def applies(rules: Sequence[Rule], source: str) -> list[Rule]:
    """The rules that may have something to say about this text (a cheap test)."""
    return [r for r in rules if _may_apply(r, source)]


def any_applies(rules: Sequence[Rule], source: str) -> bool:
    """Some rule may have something to say about this text (`applies`, stopping early)."""
    return any(_may_apply(r, source) for r in rules)


def _may_apply(rule: Rule, source: str) -> bool:
    return any(token in source for token in rule.tokens) and (
        rule.pattern is None or rule.pattern.search(source) is not None
    )


def _diagnostics(
    module: cst.Module,
    path: str,
    rules: Sequence[Rule],
    settings: Settings,
    on_rule_error: RuleErrorHandler | None = None,
    env: Environment | None = None,
    every: Sequence[Rule] = (),
    summary: bool = True,
) -> list[Diagnostic]:
    """The findings of `rules`; of `every` rule in a file of a project (`env`): what a
    rule looks for may be in another file. The file's summary goes to `env` (unless not
    wanted: `summary`)."""
    found: list[Diagnostic] = []
    try:
        model = build(module, path, settings, env)
        if env is not None and env.path is not None:
            if summary:
                env.summary = summarize(model)
            env.checked = True
            rules = every
        for rule in rules:
            try:
                found.extend(list(rule.check(model)))  # all of a rule's findings, or none
            except RecursionError:
                raise
            except Exception as exc:
                if on_rule_error is None:
                    raise
                on_rule_error(rule.code, exc)
    except RecursionError:
        raise LintError(TOO_DEEP) from None
    return found


def _positions(
    module: cst.Module,
    diagnostics: Sequence[Diagnostic] = (),
    with_edits: bool = False,
    layout: Layout | None = None,
) -> NodePositions:
    """Positions of the reported nodes and of the nodes their fixes edit (any other node
    on demand), and of the top-level statements for fixes shown as text edits: never of
    the whole tree (with the module's `layout`, only of the statements holding them)."""
    nodes = [d.node for d in diagnostics]
    nodes += [e.node for d in diagnostics if d.fix is not None for e in d.fix.edits]
    if with_edits:
        nodes += module.body
    return NodePositions(module, nodes, layout)


def _span(positions, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
    r: CodeRange = positions[node]
    return (r.start.line, r.start.column), (r.end.line, r.end.column)


def _too_deep_is_a_lint_error(method: Callable[P, R]) -> Callable[P, R]:
    """libcst recurses in Python too (code generation, positions, fixes): a tree deeper
    than the recursion limit is a file we cannot analyse, not a crash."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except RecursionError:
            raise LintError(TOO_DEEP) from None

    return wrapper


class Linter:
    """Runs a fixed set of rules over sources."""

    def __init__(
        self,
        rules: Sequence[Rule],
        settings: Settings | None = None,
        unfixable: frozenset[str] = frozenset(),
        on_rule_error: RuleErrorHandler | None = None,
        summary: bool = True,
        low_impact: bool = False,
    ) -> None:
        self.rules = list(rules)
        self.settings = settings or Settings()
        self.names = {r.code: r.name for r in self.rules}
        self.unfixable = unfixable  # their findings carry no fix (as ruff's `unfixable`)
        # False: low-impact findings are found (reports count them) but not shown, so
        # they carry no fix: `fix` changes nothing `check` did not show.
        self.low_impact = low_impact
        self.on_rule_error = on_rule_error
        # False: a lint with an environment leaves out the file's summary (an editor's
        # unsaved text: the rest of its project sees the file as saved).
        self.summary = summary

    def _diagnostics(
        self,
        module: cst.Module,
        path: str,
        rules: Sequence[Rule],
        env: Environment | None = None,
    ) -> list[Diagnostic]:
        found = _diagnostics(
            module, path, rules, self.settings, self.on_rule_error, env, self.rules, self.summary
        )
        if self.unfixable or not self.low_impact:
            found = [
                dataclasses.replace(d, fix=None)
                if d.fix is not None and (d.code in self.unfixable or not self._shown(d))
                else d
                for d in found
            ]
        return found

    def _shown(self, d: Diagnostic) -> bool:
        return self.low_impact or d.impact is Impact.HIGH

    @_too_deep_is_a_lint_error
    def lint(
        self,
        source: str,
        path: str = "<string>",
        with_edits: EditsWanted = False,
        buffer: Buffer | None = None,
        env: Environment | None = None,
    ) -> list[Violation]:
        """Findings in `source`, suppressions applied, sorted by position; the text edits of
        the fixes of those `with_edits` asks for. An editor's `buffer` parses the text
        again only where it changed since the buffer's last text. `env`: what the rest of
        the project tells the file (and gets its summary)."""
        _refuse_unchecked(source)  # before anything else reads the whole text
        rules = applies(self.rules, source)
        if not rules and not (env is not None and env.reached):
            _check_syntax(source, path)
            return []
        _check_size(source, path)
        module = buffer.parse(source, path) if buffer is not None else parse(source, path)
        diagnostics = self._diagnostics(module, path, rules, env)
        return self._violations(module, source, diagnostics, with_edits, buffer)

    def summarize(self, source: str, path: str, env: Environment) -> None:
        """The summary of a file no rule reads (a module other files import), into `env`."""
        _check_size(source, path)
        env.summary = summarize(build(parse(source, path), path, self.settings, env))

    def _violations(
        self,
        module: cst.Module,
        source: str,
        diagnostics: Sequence[Diagnostic],
        with_edits: EditsWanted,
        buffer: Buffer | None = None,
        refused: dict[FindingKey, str] | None = None,
    ) -> list[Violation]:
        """Violations of `diagnostics`; those whose fix the gate `refused` say why, and
        carry no fix."""
        if not diagnostics:
            return []
        suppressions = parse_suppressions(source)
        layout = buffer.layout_of(module) if buffer is not None else None
        positions = _positions(module, diagnostics, bool(with_edits), layout)
        out: list[Violation] = []
        seen: set[tuple[str, int, int]] = set()
        for d in diagnostics:
            r: CodeRange = positions[d.node]
            if suppressions.suppressed(d.code, r.start.line):
                continue
            key = (d.code, r.start.line, r.start.column + 1)
            if key in seen:
                continue
            seen.add(key)
            record = None
            message = d.message
            why = refused.get(_key(module, d)) if refused and d.fix is not None else None
            if why is not None:
                message += f" (not fixed: {why})"
            elif d.fix is not None:
                wanted = with_edits if isinstance(with_edits, bool) else key in with_edits
                edits = text_edits(module, source, positions, d.fix) if wanted else ()
                record = FixRecord(d.fix.title, d.fix.applicability.value, edits)
            out.append(
                Violation(
                    d.code,
                    self.names.get(d.code, ""),
                    message,
                    r.start.line,
                    r.start.column + 1,
                    r.end.line,
                    r.end.column + 1,
                    record,
                    impact=d.impact.value,
                )
            )
        out.sort(key=lambda v: (v.line, v.column, v.code))
        return out

    @_too_deep_is_a_lint_error
    def fix(
        self,
        source: str,
        path: str = "<string>",
        unsafe: bool = False,
        env: Environment | None = None,
    ) -> FixOutcome:
        """Apply every applicable fix, re-linting after each pass until nothing changes.
        Each pass is checked before it is kept (`torchlint.gate`). `env`: as for `lint`."""
        _refuse_unchecked(source)
        rules = applies(self.rules, source)
        outcome = FixOutcome(source)
        if not rules and not (env is not None and env.reached):
            _check_syntax(source, path)
            return outcome
        _check_size(source, path)
        text = source
        module = parse(text, path)
        gate = Gate(text)
        refused: dict[FindingKey, str] = {}
        first: Counter[str] | None = None
        for _ in range(MAX_FIX_PASSES):
            step = self._fix_pass(module, path, rules, unsafe, gate, refused, env)
            first = step.fixable if first is None else first
            if step.remaining is not None:
                outcome.remaining = step.remaining
                break
            del module  # one tree at a time: this one goes before the next is parsed
            try:
                module = parse(step.text, path)
            except LintError as exc:  # libcst cannot read back code it generated
                raise LintError(
                    f"a fix produced invalid code ({exc}); file left unchanged"
                ) from None
            outcome.fixed.extend(step.fixed)
            gate = gate.then(step.text)
            text = step.text
            # A fix may bring in what another rule looks for (TL303 adds a
            # DistributedSampler that TL304 checks): re-select on the new text.
            rules = applies(self.rules, text)
        else:
            diagnostics = self._diagnostics(module, path, rules, env)
            outcome.remaining = self._violations(module, text, diagnostics, False, None, refused)
        outcome.text = text
        outcome.later = later(first or Counter(), outcome.fixed)
        return outcome

    def _fix_pass(
        self,
        module: cst.Module,
        path: str,
        rules: Sequence[Rule],
        unsafe: bool,
        gate: Gate,
        refused: dict[FindingKey, str],
        env: Environment | None,
    ) -> _Pass:
        """One pass over `gate.text`: the fixes that pass the gate applied, or (nothing
        to apply) the findings that remain. Refusals are added to `refused`."""
        text = gate.text
        suppressions = parse_suppressions(text)
        diagnostics = self._diagnostics(module, path, rules, env)
        positions = None
        candidates: list[Diagnostic] = []
        for d in diagnostics:
            if d.fix is None or (d.fix.applicability is Applicability.UNSAFE and not unsafe):
                continue
            positions = positions or _positions(module, diagnostics)
            if suppressions.suppressed(d.code, positions[d.node].start.line):
                continue
            candidates.append(d)
        fixable = Counter(d.code for d in candidates)
        if refused:
            candidates = [d for d in candidates if _key(module, d) not in refused]
        while candidates:
            by_fix = {id(d.fix): d for d in candidates}  # by identity: fixes may be equal
            chosen = select_compatible(
                [d.fix for d in candidates if d.fix is not None],
                lambda n, p=positions: _span(p, n),
            )
            checked = apply_checked(module, chosen, gate)
            for fix, why in checked.refused:
                refused[_key(module, by_fix[id(fix)])] = why
            if checked.applied and checked.text != text:
                codes = [by_fix[id(proposed)].code for proposed, _ in checked.applied]
                return _Pass(checked.text, codes, fixable, None)
            if not checked.refused:
                break
            gone = {id(fix) for fix, _ in checked.refused}
            candidates = [d for d in candidates if id(d.fix) not in gone]
        remaining = self._violations(module, text, diagnostics, False, None, refused)
        return _Pass(text, [], fixable, remaining)


def _key(module: cst.Module, d: Diagnostic) -> FindingKey:
    return d.code, module.code_for_node(d.node), d.fix.title if d.fix is not None else ""


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=path,
            tofile=path,
        )
    )
