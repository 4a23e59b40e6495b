"""`torchlint explain`: what the analysis knows at a line of a file (or in the whole
file), as `check` sees the file: with what its project tells it.

`explain` checks the file as `check` checks it (`run.run`: its project's rounds, to
their fixed point, with the run's cache); `explain_text` takes a text that was checked
already, with what its project told it (the language server's hover: an editor's
buffer, its lint's findings, its `Environment`). Either way the text is analysed once
more here (`_Analysis`), with that environment, and every rule is run on that model,
the selected ones and the others: a finding the run hides (low impact, a noqa comment,
per-file-ignores, a rule not selected) shows with the reason, and a finding of the run
is matched to it. The facts (the loops and the function around the line, what the names
on it hold, where the file puts its work) are read off the same model (`facts.py`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torchlint.config.load import expand
from torchlint.config.plan import RunPlan
from torchlint.explain.facts import At, Facts, file_facts, line_facts
from torchlint.explain.where import Where, at_line, whole
from torchlint.lint.noqa import Suppressions, parse_suppressions
from torchlint.lint.tokens import applies
from torchlint.results import Impact, Violation
from torchlint.run.files import Mode, run
from torchlint.text.source import SourceError, read_source

if TYPE_CHECKING:
    import libcst as cst

    from torchlint.lint.incremental import Buffer
    from torchlint.lint.notebook import Chunk, Program
    from torchlint.rule import Diagnostic, Rule
    from torchlint.semantic import TorchModule
    from torchlint.semantic.external import Environment


class ExplainError(Exception):
    """Input that cannot be explained (no such file, a line out of range, a file that
    does not parse): the message says why."""


@dataclass(frozen=True)
class Place:
    """What to explain: a line (of a notebook's cell), or the whole file (`line` None)."""

    path: Path
    line: int | None = None
    cell: int | None = None


# `PATH:LINE`, `PATH:cell N:LINE` (a notebook's cell), with the column reports add.
_PLACE = re.compile(r"(?P<path>.+?)(?::cell ?(?P<cell>\d+))?:(?P<line>-?\d+)(?::\d+)?")


def place(spec: str) -> Place:
    """`PATH`, `PATH:LINE` or `PATH:cell N:LINE` (as reports write a place, a column
    after it allowed); ExplainError for a line or cell below 1."""
    found = _PLACE.fullmatch(spec)
    if found is None or Path(spec).exists():
        return Place(Path(spec))
    line, cell = int(found["line"]), found["cell"]
    if line < 1 or cell == "0":
        raise ExplainError(f"{spec!r}: lines and cells are numbered from 1")
    return Place(Path(found["path"]), line, int(cell) if cell is not None else None)


@dataclass
class Finding:
    """A finding at the place explained, and why `check` does not show it (`hidden`
    empty: it does)."""

    code: str
    name: str
    line: int
    column: int
    impact: str
    message: str
    hidden: list[str] = field(default_factory=list)
    cell: int | None = None


@dataclass
class RuleState:
    """A selected rule at the place explained: its tokens (and pattern) are in the
    file's text, the run read the file for it, what it said there."""

    code: str
    name: str
    tokens: bool
    reads: bool
    # "reported", "hidden", "no finding", "did not read the file", "ignored in this file"
    here: str
    found: list[At] = field(default_factory=list)  # where its findings are in the file
    # why it passed over what it looked at here (`Rule.pass_over`), with the line
    passed: list[str] = field(default_factory=list)


@dataclass
class Explanation:
    path: str
    line: int | None
    cell: int | None
    text: str  # the line's code ("" for the whole file)
    findings: list[Finding]
    read: str  # why the run read the file, or why it did not
    rules: list[RuleState]
    facts: Facts
    errors: list[str] = field(default_factory=list)  # rules that raised on the file

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def explain(at: Place, plan: RunPlan, cache_dir: Path | None = None) -> Explanation:
    """What the analysis knows at `at`, the file checked as `check` would check it
    under `plan`, with its project (`cache_dir`: the run's cache, None for none)."""
    path = at.path
    if not path.exists():
        raise ExplainError(f"{path}: no such file")
    if not path.is_file():
        raise ExplainError(f"{path}: not a file (explain takes one file)")
    ran = run(plan, [path], Mode.CHECK, cache_dir=cache_dir, bases={path: path.parent})
    (result,) = ran.results
    if result.errors:
        raise ExplainError(f"{result.path}: {result.error}")
    if result.warning:
        raise ExplainError(f"{result.path}: {result.warning}")
    try:
        text = read_source(path).text
    except SourceError as exc:
        raise ExplainError(f"{result.path}: {exc}") from None
    return explain_text(at, text, plan, result.violations, ran.environment(0), result.path)


def explain_text(
    at: Place,
    text: str,
    plan: RunPlan,
    violations: Sequence[Violation],
    env: Environment | None = None,
    name: str | None = None,
    buffer: Buffer | None = None,
) -> Explanation:
    """What the analysis knows at `at` in `text` (a notebook's JSON where `name` ends in
    `.ipynb`), checked under `plan` (its per-file-ignores applied here, for `at.path`)
    with `violations` the findings the check gave it and `env` what its project told it
    (None: the file alone); an editor's `buffer` gives the tree its lint parsed (the
    text parsed again only where it changed). ExplainError where it cannot be explained
    (a line out of range, a text that does not parse)."""
    from torchlint.semantic.external import Environment

    codes = tuple(plan.config.rules_for(at.path, plan.codes))
    named = name if name is not None else str(at.path)
    checked = _Analysis(at, plan, codes, named, text, violations, env or Environment())
    return checked.explanation(buffer)


class _Analysis:
    """One text analysed with what its project tells it, every rule run on it."""

    def __init__(
        self,
        at: Place,
        plan: RunPlan,
        codes: tuple[str, ...],
        name: str,
        text: str,
        violations: Sequence[Violation],
        env: Environment,
    ) -> None:
        self.at, self.plan, self.codes, self.env = at, plan, codes, env
        self.name, self.violations = name, violations
        self.program: Program | None = None
        self.chunks: list[Chunk] = []
        if self.name.endswith(".ipynb"):
            from torchlint.lint.notebook import Notebook, NotebookError

            try:
                self.program = Notebook.parse(text).program()
                self.chunks = self.program.split(self.program.source)
            except NotebookError as exc:
                raise ExplainError(f"{self.name}: {exc}") from None
            text = self.program.source
        self.source = text
        self.line = self._program_line()
        self.read: str | None = None  # why the run read the file (None: it did not)
        self.errors: list[str] = []  # rules that raised
        self.passed: dict[str, list[str]] = {}  # code -> why it passed over the line

    def _program_line(self) -> int | None:
        """The line asked, in the program analysed (a notebook's cells as one)."""
        at, lines = self.at, self.source.splitlines()
        if at.line is None:
            if at.cell is not None:
                raise ExplainError(f"{self.name}: a cell is explained at a line (cell N:LINE)")
            return None
        if self.program is None:
            if at.cell is not None:
                raise ExplainError(f"{self.name}: not a notebook: no cells (use PATH:LINE)")
            if at.line > len(lines):
                raise ExplainError(f"{self.name}: line {at.line} is out of range (1-{len(lines)})")
            return at.line
        if at.cell is None:
            raise ExplainError(f"{self.name}: a notebook's line is `PATH:cell N:LINE`")
        chunk = next((c for c in self.chunks if c.cell == at.cell), None)
        if chunk is None:
            raise ExplainError(f"{self.name}: no code cell {at.cell}")
        count = len(chunk.code.splitlines())
        if at.line > max(count, 1):
            raise ExplainError(
                f"{self.name}: line {at.line} is out of range in cell {at.cell} (1-{count})"
            )
        return chunk.start + at.line - 1

    def shown(self, line: int) -> tuple[int | None, int]:
        """A program line as reports show it: (cell, line in the cell) in a notebook."""
        if self.program is None or not self.chunks:
            return None, line
        chunk, inner = self.program.locate(self.chunks, line)
        return chunk.cell, inner

    def explanation(self, buffer: Buffer | None = None) -> Explanation:
        from torchlint.lint.parser import LintError, parse
        from torchlint.semantic import build

        selected = [self.plan.config.rules[c] for c in self.codes]
        tokens = {r.code for r in applies(selected, self.source, self.plan.settings.knowledge)}
        self.read = self._read(tokens)
        try:
            tree = (buffer.parse if buffer is not None else parse)(self.source, self.name)
        except LintError as exc:
            raise ExplainError(f"{self.name}: {exc.file_error()}") from None
        module = build(tree, self.name, self.plan.settings, self.env)
        try:
            if self.line is None:
                where = whole(tree)
                facts = file_facts(module, self.shown, where)
            else:
                laid = buffer.layout_of(tree) if buffer is not None else None
                where = at_line(tree, self.source, self.line, laid)
                facts = line_facts(module, self.line, self.shown, where)
            found = self._findings(module, where)
        finally:
            module.release()
        here = [f for f, line in found if self.line in (None, line)]
        rules = [self._state(self.plan.config.rules[c], tokens, found) for c in self.plan.codes]
        return Explanation(
            self.name,
            self.at.line,
            self.at.cell,
            self.source.splitlines()[self.line - 1].strip() if self.line else "",
            here,
            self.read or self._unread(),
            rules,
            facts,
            self.errors,
        )

    def _read(self, tokens: set[str]) -> str | None:
        """Why the run read the file (every selected rule then reads it: in a project, a
        file read is read by all), or None where it did not."""
        if self.plan.settings.knowledge.named_in(self.source):
            return "yes: it names a callable the project's knowledge names"
        if tokens:
            return (
                f"yes: the tokens of {', '.join(sorted(tokens))} are in it (every selected "
                "rule reads a file the run reads)"
            )
        if self.env.engaged:
            return "yes: it trains, evaluates or loads data (what its project gives it counts)"
        if self.env.reached:
            return "yes: another file of its project calls its functions or uses what it builds"
        return None

    def _unread(self) -> str:
        return (
            "no: no selected rule's tokens are in it, and its project does not reach into it "
            "(`torchlint rules` lists the rules and --select picks others)"
        )

    def _findings(self, module: TorchModule, where: Where) -> list[tuple[Finding, int]]:
        """Every rule's findings (the selected ones' and the others'), with why each is
        hidden; the run's findings first, matched by position. (finding, program line)."""
        suppressions = parse_suppressions(self.source)
        out: dict[tuple[str, int | None, int, int], tuple[Finding, int]] = {}
        for v in self.violations:
            program_line = v.line if v.cell is None else self._from_cell(v)
            out[(v.code, v.cell, v.line, v.column)] = (self._finding(v), program_line)
        diagnostics = self._diagnostics(module, where)
        where.want(d.node for d in diagnostics)  # (their statements generated at once)
        positions = where.positions
        for diagnostic in diagnostics:
            start = positions[diagnostic.node].start
            cell, line = self.shown(start.line)
            key = (diagnostic.code, cell, line, start.column + 1)
            if key in out:
                continue
            rule = self.plan.config.rules[diagnostic.code]
            why = self._hidden(diagnostic, start.line, suppressions)
            if not why:  # (the run should have reported it)
                why = ["not reported by the run: an analysis here differs (please report it)"]
            finding = Finding(
                diagnostic.code,
                rule.name,
                line,
                start.column + 1,
                diagnostic.impact.value,
                diagnostic.message,
                why,
                cell,
            )
            out[key] = (finding, start.line)
        return sorted(out.values(), key=lambda f: (f[1], f[0].column, f[0].code))

    def _from_cell(self, v: Violation) -> int:
        chunk = next(c for c in self.chunks if c.cell == v.cell)
        return chunk.start + v.line - 1

    def _finding(self, v: Violation) -> Finding:
        """A finding of the run: hidden only where it is of low impact."""
        hidden = []
        if v.impact == Impact.LOW.value and not self.plan.low_impact:
            hidden.append("low impact: shown with --show-low-impact")
        return Finding(v.code, v.name, v.line, v.column, v.impact, v.message, hidden, v.cell)

    def _diagnostics(self, module: TorchModule, where: Where) -> list[Diagnostic]:
        """What every rule of the configuration says of the model, and why each passed
        over what it looked at at the line (`passed`); a rule that raises says nothing,
        and is named in `errors`."""
        found: list[Diagnostic] = []
        for code, rule in self.plan.config.rules.items():
            instance = rule()
            instance.passed = []
            try:
                if instance.applies(module):
                    found += list(instance.check(module))
                else:
                    instance.pass_over(None, instance.guard(module) or OWN_GUARD)
            except Exception as exc:  # (a local or installed rule's: the run says so too)
                self.errors.append(f"{code} raised {type(exc).__name__}: {exc}")
            self.passed[code] = self._at_line(instance.passed, where)
        return found

    def _at_line(self, passed: list[tuple[cst.CSTNode | None, str]], where: Where) -> list[str]:
        """The reasons given for the whole file or for a node at the line explained (on
        its first line, or spanning it: a loop), each once, with where it was given."""
        out: list[str] = []
        for node, why in passed:
            if node is None:
                said = why
            elif self.line is not None and not where.may_span(node):
                continue  # (in another top-level statement: not positioned)
            else:
                span = where.positions[node]
                if self.line is not None and not span.start.line <= self.line <= span.end.line:
                    continue
                cell, line = self.shown(span.start.line)
                said = f"{why} (line {f'cell {cell}:' if cell else ''}{line})"
            if said not in out:
                out.append(said)
        return out

    def _hidden(self, d: Diagnostic, line: int, suppressions: Suppressions) -> list[str]:
        """Why the run does not show a finding of this analysis."""
        why = [] if self.read else ["the run did not read the file (see below)"]
        if d.code not in self.plan.codes:
            why.append(_unselected(self.plan, d.code))
        elif d.code not in self.codes:
            why.append("per-file-ignores: ignored in this file")
        if suppressions.suppressed(d.code, line):
            whole = d.code in suppressions.file or "ALL" in suppressions.file
            why.append("a `# torchlint: noqa` comment for the file" if whole else "a noqa comment")
        if d.impact is Impact.LOW and not self.plan.low_impact:
            why.append("low impact: shown with --show-low-impact")
        return why

    def _state(
        self, rule: type[Rule], tokens: set[str], found: list[tuple[Finding, int]]
    ) -> RuleState:
        own = [f for f, _ in found if f.code == rule.code]
        here = [f for f, line in found if f.code == rule.code and self.line in (None, line)]
        if rule.code not in self.codes:
            state = "ignored in this file"
        elif not self.read:
            state = "did not read the file"
        elif any(not f.hidden for f in here):
            state = "reported"
        elif here:
            state = "hidden"
        else:
            state = "no finding"
        lines = sorted({(f.cell or 0, f.line) for f in own})
        where = [At(line, cell or None) for cell, line in lines]
        reads = self.read is not None
        passed = self.passed.get(rule.code, []) if state == "no finding" else []
        return RuleState(rule.code, rule.name, rule.code in tokens, reads, state, where, passed)


# A rule whose own `applies` keeps it out of a file, none of the base class's guards.
OWN_GUARD = "its own guard (`applies`) keeps it out of this file"


def _unselected(plan: RunPlan, code: str) -> str:
    """Why a rule does not run: ignored, a preview rule, off by default, not selected."""
    config = plan.config
    rule = config.rules[code]
    if code in expand(config.ignore, config.rules, unchecked=True):
        return f"{code} is ignored (`ignore`, --ignore)"
    if rule.preview and not config.preview:
        return f"{code} is a preview rule: it runs with --preview"
    if not rule.default_enabled and config.select is None:
        return f"{code} is off by default: select it (--extend-select {code})"
    return f"{code} is not selected (--select, --extend-select)"
