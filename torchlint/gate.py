"""The fixed program is checked before it is written.

A pass of fixes may not make the program read a name where nothing binds it yet (in the
order it runs: module order, a notebook's cells in order, imports inside `try:`), nor
indent a line with tabs and spaces, nor stop compiling. When the pass does, the fixes
that may be the cause (those that mention a name now unbound, else all of them) are
tried one at a time on top of the others: a fix that fails is repaired where it can be
(the import its code needs added to the import block, which runs before it, where the
file imports the name plainly further down; an import statement it removes kept) and
otherwise left out, with the reason, which its finding then gives.

Only fix and diff runs pay for this: CPython parses and compiles the new text of each
pass (once, unless a fix is refused), and a walk of its tree finds the unbound names.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import libcst as cst

from torchlint.fixes import Fix, Import, Remove, Replace, apply_fixes, module_bindings
from torchlint.undefined import mixed_indentation, undefined_in
from torchlint.walk import descendants

IDENTIFIER = re.compile(r"[^\W\d]\w*")


@dataclass(frozen=True)
class Problems:
    """What a fixed text has that the text before it had not."""

    names: frozenset[str] = frozenset()  # read where nothing binds them, more often
    mixed: bool = False  # more lines indented with tabs and spaces
    unparsable: bool = False  # CPython no longer compiles it

    def __bool__(self) -> bool:
        return bool(self.names) or self.mixed or self.unparsable

    @property
    def reason(self) -> str:
        if self.unparsable:
            return "the fixed code would not compile"
        if self.mixed:
            return "it would indent a line with tabs and spaces"
        names = ", ".join(f"`{n}`" for n in sorted(self.names))
        return f"it would read {names} before anything binds it"


class Gate:
    """A text's unbound names (None: this Python cannot compile it) and mixed-indentation
    lines, to compare fixed texts with."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.names = _unbound(text)
        self.mixed = mixed_indentation(text)
        self._last: tuple[str, Gate] | None = None

    def problems(self, text: str) -> Problems:
        after = Gate(text)
        self._last = (text, after)
        if self.names is None:  # syntax newer than this Python: only libcst judges it
            return Problems(mixed=after.mixed > self.mixed)
        if after.names is None:
            return Problems(unparsable=True)
        added = frozenset(after.names - self.names)
        return Problems(added, after.mixed > self.mixed)

    def then(self, text: str) -> Gate:
        """The gate for the next pass, from `text` (checked last, usually)."""
        if self._last is not None and self._last[0] == text:
            return self._last[1]
        return Gate(text)


def _unbound(text: str) -> Counter[str] | None:
    """How often each name is read unbound in `text`; None if CPython cannot compile it
    (a repeated keyword argument, say, which its parser accepts)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings are the user's compiler's to print
        try:
            tree = ast.parse(text)
            compile(tree, "<fixed>", "exec", dont_inherit=True)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    return Counter(name for name, _ in undefined_in(tree))


@dataclass
class Checked:
    text: str
    applied: list[tuple[Fix, Fix]]  # (as proposed, as applied: repaired, perhaps)
    refused: list[tuple[Fix, str]]  # and why


def apply_checked(module: cst.Module, fixes: Sequence[Fix], gate: Gate) -> Checked:
    """Apply compatible `fixes` to `module` (whose code is `gate.text`), leaving out or
    repairing those whose result `gate` finds problems with."""
    text = apply_fixes(module, fixes)
    found = gate.problems(text)
    if not found:
        return Checked(text, [(f, f) for f in fixes], [])
    suspects = list(fixes)
    if found.names and not (found.mixed or found.unparsable):
        suspects = [f for f in fixes if mentions(f) & found.names] or suspects
    kept = [f for f in fixes if not any(f is s for s in suspects)]
    applied: list[tuple[Fix, Fix]] = [(f, f) for f in kept]
    text = apply_fixes(module, kept) if kept else gate.text
    if kept and gate.problems(text):  # the suspects were not all: try every fix alone
        suspects, applied, text = list(fixes), [], gate.text
    refused: list[tuple[Fix, str]] = []
    for proposed in suspects:
        done = [a for _, a in applied]
        trial = apply_fixes(module, [*done, proposed])
        problems = gate.problems(trial)
        fixed = proposed
        if problems and problems.names and not (problems.mixed or problems.unparsable):
            repaired = _repaired(module, proposed, problems.names)
            if repaired is not None:
                trial = apply_fixes(module, [*done, repaired])
                if not gate.problems(trial):
                    problems, fixed = Problems(), repaired
        if problems:
            refused.append((proposed, problems.reason))
        else:
            applied.append((proposed, fixed))
            text = trial
    gate.problems(text)  # the last text checked is the one kept
    return Checked(text, applied, refused)


def mentions(fix: Fix) -> set[str]:
    """Every name the code a fix writes, replaces or removes holds."""
    nodes: list[cst.CSTNode] = []
    for edit in fix.edits:
        if isinstance(edit, Remove):
            nodes.append(edit.node)
        elif isinstance(edit, Replace):
            nodes += [edit.node, edit.new]
        else:
            nodes += edit.statements
    found = {n.value for root in nodes for n in descendants(root) if isinstance(n, cst.Name)}
    found.update(imp.bound_name for imp in fix.imports)
    for definition in fix.definitions:
        found.add(definition.name)
        found.update(IDENTIFIER.findall(definition.code))
    return found


def _repaired(module: cst.Module, fix: Fix, names: frozenset[str]) -> Fix | None:
    """`fix` keeping the import statements it removes that bind `names`, and importing
    the other names early where the module imports them plainly further down; None when
    some name is neither."""
    dropped = [e for e in fix.edits if isinstance(e, Remove) and module_bindings(e.node) & names]
    edits = tuple(e for e in fix.edits if not any(e is d for d in dropped))
    kept = set().union(*(module_bindings(e.node) for e in dropped))
    plain = _plain_imports(module)
    missing = names - kept
    if not edits or not missing <= set(plain):
        return None
    early = tuple(replace(plain[name], early=True) for name in sorted(missing))
    return replace(fix, edits=edits, imports=(*fix.imports, *early))


def _plain_imports(module: cst.Module) -> dict[str, Import]:
    """Names bound by a top-level `import x` or `from m import x` (no alias, not in a
    block: one in `try:` may fail where it runs first), and the import of each."""
    found: dict[str, Import] = {}
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if alias.asname is None:
                        top = cst.Module([]).code_for_node(alias.name).split(".")[0]
                        found.setdefault(top, Import(top))
            elif (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not small.relative
                and not isinstance(small.names, cst.ImportStar)
            ):
                base = cst.Module([]).code_for_node(small.module)
                for alias in small.names:
                    if alias.asname is None and isinstance(alias.name, cst.Name):
                        found.setdefault(alias.name.value, Import(base, alias.name.value))
    return found


def later(first: Counter[str], applied: Iterable[str]) -> list[str]:
    """The codes of applied fixes beyond the fixable findings first reported, by code:
    findings that other fixes brought about."""
    return sorted((Counter(applied) - first).elements())
