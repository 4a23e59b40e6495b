"""One file: parse once, build the model, run every selected rule, fix to a fixpoint.

Positions are resolved only for files that have something to report: a full
`PositionProvider` pass costs about four traversals, and most files report nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
from collections import Counter
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import libcst as cst
from libcst.metadata import CodeRange

from torchlint.fixes import Applicability, apply_line_edits, select_compatible, text_edits
from torchlint.lint.gate import Gate, apply_checked, later
from torchlint.lint.noqa import FIX_TITLE, Suppressions, parse_suppressions
from torchlint.lint.parser import (
    TOO_DEEP,
    LintError,
    check_compiles,
    check_size,
    parse,
    refuse_unchecked,
)
from torchlint.lint.tokens import applies
from torchlint.results import UNUSED_NOQA, FixRecord, Impact, TextEdit, Violation
from torchlint.rule import BUILT_IN, Diagnostic, Rule
from torchlint.semantic import build
from torchlint.semantic.exports import summarize
from torchlint.semantic.external import Environment, Summary
from torchlint.settings import Settings
from torchlint.text.positions import Layout, NodePositions
from torchlint.text.source import split_lines

if TYPE_CHECKING:
    from torchlint.lint.incremental import Buffer

MAX_FIX_PASSES = 16
# Which findings get their fix's text edits: all, none, or those of these keys
# (code, line, column: the finding's start, 1-based), as an editor asks for one.
EditsWanted = bool | Set[tuple[str, int, int]]
# Told of a rule that raised (its code, the exception), so that the other rules' findings
# still count; without one, a built-in rule's exception propagates (a bug of torchlint's)
# and a local or installed rule's is kept in the linter's `failures`.
RuleErrorHandler = Callable[[str, Exception], None]


@dataclass(frozen=True)
class FileAnalysis:
    """What a lint of one file learned: its findings; in a file of a project (an `env`
    with a path), what the file tells its project (`summary`: None where the linter
    leaves it out) and whether the rules read it (`checked`: not only its syntax)."""

    violations: list[Violation]
    summary: Summary | None = None
    checked: bool = False


@dataclass
class FixOutcome:
    text: str
    fixed: list[str] = field(default_factory=list)  # codes of the applied fixes
    remaining: list[Violation] = field(default_factory=list)
    # Codes of applied fixes of findings that were not there to report before other
    # fixes (as many per code as were applied beyond the findings first reported).
    later: list[str] = field(default_factory=list)
    # In a file of a project: as `FileAnalysis`'s, of the text the fixes leave.
    summary: Summary | None = None
    checked: bool = False


# A finding whose fix the gate refused, across passes: its code, its node's code, the
# fix's title.
FindingKey = tuple[str, str, str]


@dataclass
class _Pass:
    text: str
    fixed: list[str]  # codes of the fixes applied
    fixable: Counter[str]  # the fixable findings of the text before the pass, by code
    remaining: list[Violation] | None  # nothing applied: the findings that remain
    summary: Summary | None  # of the text before the pass (`_diagnostics`)


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


def _span(positions: NodePositions, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
    r: CodeRange = positions[node]
    return (r.start.line, r.start.column), (r.end.line, r.end.column)


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
        # Local and installed rules that raised (without `on_rule_error`): code -> what
        # happened, said on the file with the other rules' findings.
        self.failures: dict[str, str] = {}
        # False: a lint with an environment leaves out the file's summary (an editor's
        # unsaved text: the rest of its project sees the file as saved).
        self.summary = summary
        # The codes whose noqa comments TL904 judges, where it is selected: the
        # built-in rules selected but itself (another tool's codes, a plugin's, those of
        # rules not selected are left alone).
        built_in = frozenset(r.code for r in self.rules if r.origin == BUILT_IN)
        self.judged = built_in - {UNUSED_NOQA} if UNUSED_NOQA in built_in else frozenset()

    def _diagnostics(
        self,
        module: cst.Module,
        path: str,
        rules: Sequence[Rule],
        env: Environment | None = None,
    ) -> tuple[list[Diagnostic], Summary | None]:
        """The findings of `rules`; of every rule of the linter in a file of a project
        (`env`): what a rule looks for may be in another file. There, also the file's
        summary (unless the linter leaves it out: `summary`). A rule that raises goes to
        `on_rule_error` (else `_failed`); the fixes of findings not shown, or unfixable,
        are dropped."""
        handler = self.on_rule_error or self._failed
        found: list[Diagnostic] = []
        told = None
        try:
            model = build(module, path, self.settings, env)
            try:
                if env is not None and env.path is not None:
                    if self.summary:
                        told = summarize(model)
                    rules = self.rules
                for rule in rules:
                    try:
                        if rule.applies(model):  # all of a rule's findings, or none
                            found.extend(list(rule.check(model)))
                    except RecursionError:
                        raise
                    except Exception as exc:
                        handler(rule.code, exc)
            finally:
                model.release()
        except RecursionError:
            raise LintError(TOO_DEEP) from None
        if self.unfixable or not self.low_impact:
            found = [
                dataclasses.replace(d, fix=None)
                if d.fix is not None and (d.code in self.unfixable or not self._shown(d))
                else d
                for d in found
            ]
        return found, told

    def _failed(self, code: str, exc: Exception) -> None:
        rule = next(r for r in self.rules if r.code == code)
        if rule.origin == BUILT_IN:
            raise exc
        where = getattr(sys.modules.get(type(rule).__module__), "__file__", rule.origin)
        self.failures[code] = (
            f"rule {code} ({where}) raised {type(exc).__name__}: {exc}; "
            "the other rules' findings are reported"
        )

    def _shown(self, d: Diagnostic) -> bool:
        return self.low_impact or d.impact is Impact.HIGH

    def lint(
        self,
        source: str,
        path: str = "<string>",
        with_edits: EditsWanted = False,
        buffer: Buffer | None = None,
        env: Environment | None = None,
    ) -> list[Violation]:
        """Findings in `source` (`analyse`'s, alone)."""
        return self.analyse(source, path, with_edits, buffer, env).violations

    def analyse(
        self,
        source: str,
        path: str = "<string>",
        with_edits: EditsWanted = False,
        buffer: Buffer | None = None,
        env: Environment | None = None,
    ) -> FileAnalysis:
        """Findings in `source`, suppressions applied, sorted by position; the text edits of
        the fixes of those `with_edits` asks for. An editor's `buffer` parses the text
        again only where it changed since the buffer's last text. `env`: what the rest of
        the project tells the file (it records the questions asked; the file's summary
        comes back in the analysis). libcst recurses in Python too (code generation,
        positions): a tree deeper than the recursion limit is a file it cannot analyse
        (`LintError`), not a crash."""
        try:
            refuse_unchecked(source)  # before anything else reads the whole text
            rules = applies(self.rules, source, self.settings.knowledge)
            if not rules and not (env is not None and env.wanted):
                check_compiles(source, path)
                return FileAnalysis([])
            check_size(source, path)
            module = buffer.parse(source, path) if buffer is not None else parse(source, path)
            diagnostics, told = self._diagnostics(module, path, rules, env)
            violations = self._violations(module, source, diagnostics, with_edits, buffer)
            return FileAnalysis(violations, told, _of_project(env))
        except RecursionError:
            raise LintError(TOO_DEEP) from None

    def summarize(self, source: str, path: str, env: Environment) -> Summary:
        """The summary of a file no rule reads (a module other files import), analysed
        with what its project tells it (`env` records what it asked)."""
        check_size(source, path)
        model = build(parse(source, path), path, self.settings, env)
        try:
            return summarize(model)
        finally:
            model.release()

    def _violations(
        self,
        module: cst.Module,
        source: str,
        diagnostics: Sequence[Diagnostic],
        with_edits: EditsWanted,
        buffer: Buffer | None = None,
        refused: dict[FindingKey, str] | None = None,
    ) -> list[Violation]:
        """Violations of `diagnostics`, and TL904's; those whose fix the gate `refused`
        say why, and carry no fix."""
        if not diagnostics and not self.judged:
            return []
        suppressions = parse_suppressions(source)
        layout = buffer.layout_of(module) if buffer is not None else None
        positions = _positions(module, diagnostics, bool(with_edits), layout)
        out: list[Violation] = []
        seen: set[tuple[str, int, int]] = set()
        used: set[tuple[int, str]] = set()  # (line of a noqa comment, code it suppressed)
        for d in diagnostics:
            r: CodeRange = positions[d.node]
            if suppressions.exempt(d.code):
                continue
            by = suppressions.suppressing(d.code, r.start.line)
            if by:
                used.update((line, d.code) for line in by)
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
        if self.judged:
            out += self._unused_noqa(source, suppressions, used, with_edits)
        out.sort(key=lambda v: (v.line, v.column, v.code))
        return out

    def _unused_noqa(
        self,
        source: str,
        suppressions: Suppressions,
        used: Set[tuple[int, str]],
        with_edits: EditsWanted,
    ) -> list[Violation]:
        """TL904's findings: the `# noqa` comments naming judged codes that suppressed
        nothing, but those naming TL904 (as ruff's RUF100); each fix rewrites its line."""
        if suppressions.exempt(UNUSED_NOQA):
            return []
        lines = split_lines(source)
        out = []
        for unused in suppressions.unused(used, self.judged):
            line, start, end = unused.line, unused.directive.start + 1, unused.directive.end + 1
            if unused.directive.suppresses(UNUSED_NOQA):
                continue
            record = None
            if UNUSED_NOQA not in self.unfixable:
                key = (UNUSED_NOQA, line, start)
                wanted = with_edits if isinstance(with_edits, bool) else key in with_edits
                edit = TextEdit((line, 1), (line + 1, 1), unused.rewrite(lines[line - 1]))
                record = FixRecord(FIX_TITLE, Applicability.SAFE.value, (edit,) if wanted else ())
            name = self.names[UNUSED_NOQA]
            out.append(Violation(UNUSED_NOQA, name, unused.message, line, start, line, end, record))
        return out

    def fix(
        self,
        source: str,
        path: str = "<string>",
        unsafe: bool = False,
        env: Environment | None = None,
    ) -> FixOutcome:
        """Apply every applicable fix, re-linting after each pass until nothing changes.
        Each pass is checked before it is kept (`torchlint.lint.gate`). `env`: as for
        `analyse`; the outcome's summary is of the text the fixes leave. A tree too deep:
        as for `analyse`."""
        try:
            refuse_unchecked(source)
            rules = applies(self.rules, source, self.settings.knowledge)
            outcome = FixOutcome(source)
            if not rules and not (env is not None and env.wanted):
                check_compiles(source, path)
                return outcome
            check_size(source, path)
            text = source
            module = parse(text, path)
            gate = Gate(text)
            refused: dict[FindingKey, str] = {}
            first: Counter[str] | None = None
            for _ in range(MAX_FIX_PASSES):
                step = self._fix_pass(module, path, rules, unsafe, gate, refused, env)
                first = step.fixable if first is None else first
                outcome.summary, outcome.checked = step.summary, _of_project(env)
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
                rules = applies(self.rules, text, self.settings.knowledge)
            else:
                diagnostics, outcome.summary = self._diagnostics(module, path, rules, env)
                outcome.remaining = self._violations(
                    module, text, diagnostics, False, None, refused
                )
            outcome.text = text
            # A noqa comment is judged once, on the text the other fixes leave.
            applied = [code for code in outcome.fixed if code != UNUSED_NOQA]
            outcome.later = later(first or Counter(), applied)
            return outcome
        except RecursionError:
            raise LintError(TOO_DEEP) from None

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
        diagnostics, told = self._diagnostics(module, path, rules, env)
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
            assert positions is not None  # found for the first candidate
            by_fix = {id(d.fix): d for d in candidates}  # by identity: fixes may be equal
            chosen = select_compatible(
                [d.fix for d in candidates if d.fix is not None], partial(_span, positions)
            )
            checked = apply_checked(module, chosen, gate)
            for fix, why in checked.refused:
                refused[_key(module, by_fix[id(fix)])] = why
            if checked.applied and checked.text != text:
                codes = [by_fix[id(proposed)].code for proposed, _ in checked.applied]
                return _Pass(checked.text, codes, fixable, None, told)
            if not checked.refused:
                break
            gone = {id(fix) for fix, _ in checked.refused}
            candidates = [d for d in candidates if id(d.fix) not in gone]
        remaining = self._violations(module, text, diagnostics, False, None, refused)
        unused = {(v.code, v.line, v.column) for v in remaining if v.code == UNUSED_NOQA and v.fix}
        if unused:  # every other fix applied: the noqa codes nothing needs go
            found = self._violations(module, text, diagnostics, unused, None, refused)
            edits = [e for v in found if v.fix is not None for e in v.fix.edits]
            fixed = apply_line_edits(text, edits)
            return _Pass(fixed, [UNUSED_NOQA] * len(edits), fixable, None, told)
        return _Pass(text, [], fixable, remaining, told)


def _of_project(env: Environment | None) -> bool:
    """A file analysed as a file of its project (the rules read it with its `env`)."""
    return env is not None and env.path is not None


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
