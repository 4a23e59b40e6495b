"""Fix-safety check: does `torchlint fix --unsafe-fixes` break real scripts?

    python benchmarks/fix_safety.py [DIRS...] [--keep]

Copies repositories of real code (default: every folder of ../shared/corpus) to a
temporary directory, runs `torchlint fix --unsafe-fixes` there, compares
each changed file with its original and prints every edit that can turn a script that
ran into one that fails (exit 1 if any, or if the cascade ratio below is over 1.05):

  workers-unguarded      `num_workers` added to a DataLoader built outside an
                         `if __name__ == "__main__":` guard (at module level, or in a
                         function or class used from unguarded module-level code): under
                         spawn (macOS, Windows) and forkserver (Linux from Python 3.14)
                         every worker re-imports the script and runs that code again.
                         Functions and classes the file never uses are taken as entered
                         from another module, and pass; so does a loader bound at module
                         level that only guarded code reads (iterates: where its workers
                         start; a worker running the module again only builds it).
  workers-unpicklable    `num_workers` added to a DataLoader whose `collate_fn` or
                         `worker_init_fn` is a lambda, a nested function or a closure
                         (or, in a notebook, anything the notebook defines, dataset class
                         included): spawn and forkserver must pickle it for the workers.
  trainer-workers-unguarded
                         `dataloader_num_workers` added to Hugging Face `TrainingArguments`
                         in a file where some `.train()` runs outside the main guard, or
                         none is in the file: the Trainer starts the workers there.
  dataparallel-loss      `DataParallel(...)` wrapped around a loss: an `nn.*Loss` instance
                         or a name like criterion/loss (the wrapper returns one loss per
                         GPU, and scatters the targets).
  persistent-without-workers
                         `persistent_workers=True` added where `num_workers` is not a
                         positive literal, the NUM_WORKERS constant or the machine's CPU
                         count (`--n_cpu 0` would then raise ValueError when the loader
                         is built).
  explicit-arg           an explicit argument the user chose, removed or changed:
                         `zero_grad(set_to_none=False)`.
  autocast-refused       an autocast region added in a file that computes a binary
                         cross-entropy on probabilities (calls a `BCELoss` or
                         `binary_cross_entropy`): autocast raises on it on CUDA.
  bias-read              `bias=False` added to a layer while the file, or a Python file
                         beside it (a model defined in one file, initialised in another),
                         uses some module's `.bias` without testing it for None first
                         (`m.bias.data.zero_()`, `init.constant_(m.bias, 0)` fail on None).
  undefined-name         a name the fixed program reads where nothing binds it, in the
                         order it runs (module order, notebook cells in order, `try:`
                         imports), that the original did not read unbound.
  mixed-indentation      a fixed line indented with tabs and spaces that the original
                         did not have (a fix that wrote `\t    ds,` in a tab-indented file).
  syntax                 a fixed file that no longer parses.

It runs twice: with the default rules and with `--preview --select ALL` (every rule),
both `--unsafe-fixes`, and prints for each the cascade ratio: the fixes `fix` applied
over the fixable findings `check` reported (a fix that enables another finding raises it
above 1).

Locations are those of the original files, as ecosystem.py writes them
(`path:line`, `path:cell N:L` in notebooks).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ecosystem import default_dirs

from torchlint.lint.notebook import Notebook
from torchlint.lint.undefined import mixed_indentation, undefined_names

WORKER_FNS = ("collate_fn", "worker_init_fn")
LOSS_NAME = re.compile(r"(?i)loss|criterion")
Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
KINDS = (
    "workers-unguarded",
    "trainer-workers-unguarded",
    "workers-unpicklable",
    "persistent-without-workers",
    "dataparallel-loss",
    "explicit-arg",
    "autocast-refused",
    "bias-read",
    "undefined-name",
    "mixed-indentation",
    "syntax",
)
SELECTIONS = {"default": [], "ALL": ["--preview", "--select", "ALL"]}
# Exit 1 above this cascade ratio: at most 5% of the fixes applied may be of findings
# `check` did not show.
CASCADE_LIMIT = 1.05
FIXED = re.compile(r"\((\d+) fixed, \d+ remaining")


@dataclass(frozen=True)
class Violation:
    kind: str
    where: str  # path:line or path:cell N:L, in the original file
    message: str


# -- source ---------------------------------------------------------------------------------


def program(path: Path) -> tuple[str, list[str]]:
    """The Python text of a .py file, or of a notebook's code cells as torchlint joins
    them, and each line's label (`12`, or `cell 3:12` in a notebook)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return text, [str(n) for n in range(1, text.count("\n") + 2)]
    joined = Notebook.parse(text).program()
    labels = [""] * (joined.source.count("\n") + 1)
    for chunk in joined.split(joined.source):
        lines = len(chunk.code.splitlines())
        labels[chunk.start - 1 : chunk.start - 1 + lines] = [
            f"cell {chunk.cell}:{n}" for n in range(1, lines + 1)
        ]
        if chunk.start > 1:  # the separator line above the cell
            labels[chunk.start - 2] = f"cell {chunk.cell}:1"
    return joined.source, labels


def line_map(before: str, after: str) -> list[int]:
    """For each line of `after` (0-based), the 0-based line of `before` it comes from;
    an inserted line maps to the line above it."""
    a, b = before.splitlines(), after.splitlines()
    mapped = [0] * len(b)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for j in range(j1, j2):
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                mapped[j] = i1 + j - j1
            elif tag == "replace":
                mapped[j] = min(i1 + j - j1, i2 - 1)
            else:
                mapped[j] = max(i1 - 1, 0)
    return mapped


def name_of(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Calls of `name` (plain, as an attribute, or through `import ... as`), in source order."""
    aliases = {name}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            aliases |= {a.asname for a in node.names if a.name == name and a.asname}
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and name_of(n.func) in aliases]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def has_workers(call: ast.Call) -> bool:
    value = keyword(call, "num_workers")
    if value is None and len(call.args) > 5:  # DataLoader's 6th positional parameter
        value = call.args[5]
    return value is not None and not (isinstance(value, ast.Constant) and value.value == 0)


def surely_workers(call: ast.Call, tree: ast.Module) -> bool:
    """`num_workers` is a positive literal or the constant the worker fixes define, at
    the call or in the dict it spreads (`**kwargs`, a dict literal bound to that name or
    merged into it with `kwargs.update(other)`, everywhere in the file)."""
    value = keyword(call, "num_workers")
    if value is None and len(call.args) > 5:
        value = call.args[5]
    if value is None:
        spread = {
            k.value.id for k in call.keywords if k.arg is None and isinstance(k.value, ast.Name)
        }
        return any(positive(v) for v in spread_workers(tree, spread))
    return positive(value)


def positive(value: ast.expr) -> bool:
    """A positive literal, the NUM_WORKERS constant, the machine's CPU count
    (`os.cpu_count()`, `multiprocessing.cpu_count()`, `len(os.sched_getaffinity(0))`: at
    least 1 wherever a DataLoader runs), `max(...)` of one such or `min(...)` of all."""
    if isinstance(value, ast.Constant):
        number = value.value
        return isinstance(number, int) and not isinstance(number, bool) and number > 0
    if isinstance(value, ast.Name):
        return value.id == "NUM_WORKERS"
    if not isinstance(value, ast.Call):
        return False
    name = ast.unparse(value.func)
    if name in CPU_COUNTS:
        return True
    if name == "len" and len(value.args) == 1 and isinstance(value.args[0], ast.Call):
        return ast.unparse(value.args[0].func) == "os.sched_getaffinity"
    if name in ("max", "min") and value.args:
        found = [positive(a) for a in value.args]
        return any(found) if name == "max" else all(found)
    return False


CPU_COUNTS = {"os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count"}


def spread_workers(tree: ast.Module, names: set[str]) -> list[ast.expr]:
    """The `num_workers` values the dicts bound to `names` may hold: their dict literals'
    and those of the dicts merged into them (`kwargs.update(cuda_kwargs)`)."""
    merged = set(names)
    for node in ast.walk(tree):  # `train_kwargs.update(cuda_kwargs)`: cuda_kwargs too
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in names
        ):
            merged |= {a.id for a in node.args if isinstance(a, ast.Name)}
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if not any(isinstance(t, ast.Name) and t.id in merged for t in targets):
            continue
        assert isinstance(node, ast.Assign)
        if isinstance(node.value, ast.Dict):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "num_workers":
                    found.append(value)
        elif isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "dict":
            found += [k.value for k in node.value.keywords if k.arg == "num_workers"]
    return found


# -- scopes ---------------------------------------------------------------------------------


class Module:
    """Parents, top-level definitions and who uses them, for one parsed program."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.top = {n.name: n for n in tree.body if isinstance(n, Definition)}
        self.uses: dict[str, list[ast.Name]] = {name: [] for name in self.top}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in self.uses:
                self.uses[node.id].append(node)

    def chain(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parent:
            node = self.parent[node]
            yield node

    def context(self, node: ast.AST) -> str | Definition:
        """'guard' (under `if __name__ == "__main__":`), 'module' (unguarded module-level
        code), or the top-level definition the node is in."""
        child: ast.AST = node
        for above in self.chain(node):
            if above is self.tree:
                return "guard" if is_main_guard(child) else "module"
            if isinstance(above, Definition) and self.parent.get(above) is self.tree:
                return above
            child = above
        return "module"

    def guarded(self, node: ast.AST, seen: frozenset[str] = frozenset()) -> bool:
        """Whether the code at `node` runs only from under the main guard (or from
        another module)."""
        where = self.context(node)
        if isinstance(where, str):
            return where == "guard"
        name = where.name
        if name in seen:
            return True
        outside = [use for use in self.uses[name] if self.context(use) is not where]
        return all(self.guarded(use, seen | {name}) for use in outside)

    def iterated_guarded(self, call: ast.Call) -> bool:
        """A loader bound at module level (`train_loader = DataLoader(...)`) whose name
        every read of is guarded: its workers start where it is iterated, and a spawned
        worker that runs the module again only builds it."""
        assign = self.parent.get(call)
        if not isinstance(assign, ast.Assign) or self.parent.get(assign) is not self.tree:
            return False
        names = [t.id for t in assign.targets if isinstance(t, ast.Name)]
        reads = [
            node
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load)
        ]
        return bool(names) and all(self.guarded(read) for read in reads)

    def definition(self, name: str, at: ast.AST) -> ast.AST | None:
        """The def, class or assigned value that binds `name` nearest around `at`."""
        scopes = [s for s in self.chain(at) if isinstance(s, ast.FunctionDef | ast.Module)]
        for scope in scopes:
            for node in ast.walk(scope):
                if node is scope or self._scope(node) is not scope:
                    continue
                if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
                    return node
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in node.targets
                ):
                    return node.value
        return None

    def _scope(self, node: ast.AST) -> ast.AST:
        return next(
            (s for s in self.chain(node) if isinstance(s, ast.FunctionDef | ast.Module)),
            self.tree,
        )


def is_main_guard(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.If)
        and "__main__" in ast.unparse(node.test)
        and ("__name__" in ast.unparse(node.test))
    )


def unpicklable(module: Module, value: ast.expr, notebook: bool) -> str | None:
    """Why workers under spawn cannot receive `value` (a collate_fn, say), or None."""
    if isinstance(value, ast.Lambda):
        return "a lambda"
    if not isinstance(value, ast.Name):
        return None
    bound = module.definition(value.id, value)
    if isinstance(bound, ast.Lambda):
        return f"`{value.id}`, a lambda"
    if isinstance(bound, ast.FunctionDef) and module.parent.get(bound) is not module.tree:
        return f"`{value.id}`, a nested function"
    if isinstance(bound, ast.FunctionDef | ast.ClassDef) and notebook:
        return f"`{value.id}`, defined in the notebook"
    if isinstance(bound, ast.Call) and isinstance(bound.func, ast.Name):
        maker = module.top.get(bound.func.id)
        if isinstance(maker, ast.FunctionDef) and any(
            isinstance(n, ast.FunctionDef | ast.Lambda) for n in ast.walk(maker) if n is not maker
        ):
            return f"`{value.id}`, a closure made by `{maker.name}()`"
    return None


def notebook_class(module: Module, value: ast.expr) -> str | None:
    """A notebook-defined class the dataset argument is an instance of."""
    if isinstance(value, ast.Name):
        bound = module.definition(value.id, value)
        value = bound if isinstance(bound, ast.Call) else value
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and isinstance(module.top.get(value.func.id), ast.ClassDef)
    ):
        return value.func.id
    return None


def is_loss(module: Module, target: ast.expr) -> str | None:
    """Why `target` (what DataParallel wraps) is a loss, or None."""
    text = ast.unparse(target)
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == text for t in node.targets):
            value = node.value
            while (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr in ("cuda", "to")
            ):
                value = value.func.value
            if isinstance(value, ast.Call) and name_of(value.func).endswith("Loss"):
                return f"`{text}` is `{ast.unparse(value)}`"
    last = text.rsplit(".", 1)[-1]
    return f"`{text}` is named like a loss" if LOSS_NAME.search(last) else None


# -- the check ------------------------------------------------------------------------------


def bias_reads(tree: ast.AST) -> list[int]:
    """Lines that use some module's `.bias` (not `self.bias`) other than to test it: not
    compared with None, not under an `if`/`and` whose test mentions `bias`."""
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def guarded(node: ast.AST) -> bool:
        child, parent = node, parents.get(id(node))
        while parent is not None:
            if isinstance(parent, ast.Compare):
                return True
            tests = []
            if isinstance(parent, (ast.If, ast.IfExp, ast.While)) and child is not parent.test:
                tests.append(parent.test)
            if isinstance(parent, ast.BoolOp):
                tests += (
                    parent.values[: parent.values.index(child)] if child in parent.values else []
                )
            if any("bias" in ast.unparse(t) for t in tests):
                return True
            child, parent = parent, parents.get(id(parent))
        return False

    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "bias"
        and isinstance(node.ctx, ast.Load)
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        and not guarded(node)
    ]


def bias_removed(
    old: ast.Module, new: ast.Module, readers: list[str], where: Callable[[ast.expr], str]
) -> list[Violation]:
    """`bias=False` added to a call while some code nearby uses `.bias` unguarded."""
    if not readers:
        return []
    before = Counter(ast.unparse(c) for c in ast.walk(old) if isinstance(c, ast.Call))
    out = []
    for call in (c for c in ast.walk(new) if isinstance(c, ast.Call)):
        value = keyword(call, "bias")
        if not (isinstance(value, ast.Constant) and value.value is False):
            continue
        if before[ast.unparse(call)] > 0:
            continue  # there before the fix
        out.append(
            Violation(
                "bias-read",
                where(call),
                f"`bias=False` added, but {readers[0]} uses `.bias` without a None test",
            )
        )
    return out


def check(
    before: str,
    after: str,
    labels: list[str],
    path: str,
    notebook: bool,
    bias_readers: Sequence[str] = (),
) -> list[Violation]:
    """Every unsafe edit between the original and the fixed program of one file."""
    try:
        old = ast.parse(before)
    except SyntaxError:
        return []  # not Python this interpreter reads: nothing to compare
    try:
        new = ast.parse(after)
    except SyntaxError as exc:
        return [Violation("syntax", path, f"the fixed file does not parse: {exc}")]
    module = Module(new)
    origin = line_map(before, after)

    def where(node: ast.expr) -> str:
        return f"{path}:{labels[origin[node.lineno - 1]]}"

    found = []
    loaders_before, loaders_after = calls(old, "DataLoader"), calls(new, "DataLoader")
    if len(loaders_before) == len(loaders_after):
        for was, call in zip(loaders_before, loaders_after, strict=True):
            persistent = keyword(call, "persistent_workers")
            if (
                keyword(was, "persistent_workers") is None
                and isinstance(persistent, ast.Constant)
                and persistent.value is True
                and not surely_workers(call, new)
            ):
                found.append(
                    Violation(
                        "persistent-without-workers",
                        where(call),
                        "persistent_workers=True added where num_workers may be 0 (ValueError)",
                    )
                )
            if has_workers(was) or not has_workers(call):
                continue
            if not notebook and not module.guarded(call) and not module.iterated_guarded(call):
                found.append(
                    Violation(
                        "workers-unguarded",
                        where(call),
                        "num_workers added to a DataLoader that runs outside the main guard",
                    )
                )
            reasons = [
                f"{arg} is {why}"
                for arg in WORKER_FNS
                if (value := keyword(call, arg)) is not None
                and (why := unpicklable(module, value, notebook))
            ]
            dataset = keyword(call, "dataset") or (call.args[0] if call.args else None)
            if notebook and dataset is not None and (cls := notebook_class(module, dataset)):
                reasons.append(f"the dataset is a `{cls}`, defined in the notebook")
            if reasons:
                found.append(
                    Violation(
                        "workers-unpicklable",
                        where(call),
                        "num_workers added; "
                        f"{'; '.join(reasons)}: spawn/forkserver workers cannot unpickle it",
                    )
                )
    found += trainer_workers(old, new, module, notebook, where)
    wrapped = Counter(ast.unparse(c.args[0]) for c in calls(old, "DataParallel") if c.args)
    for call in calls(new, "DataParallel"):
        if not call.args:
            continue
        text = ast.unparse(call.args[0])
        if wrapped[text] > 0:
            wrapped[text] -= 1
        elif why := is_loss(module, call.args[0]):
            found.append(
                Violation(
                    "dataparallel-loss",
                    where(call),
                    f"DataParallel wraps a "
                    f"loss: {why}; the wrapper scatters targets and returns one loss per GPU",
                )
            )
    found += explicit_args(old, new, where)
    found += autocast_refused(old, new, where)
    found += new_names_and_indentation(
        before, after, lambda line: f"{path}:{labels[origin[line - 1]]}"
    )
    readers = [f"line {n} of this file" for n in bias_reads(old)] + list(bias_readers)
    found += bias_removed(old, new, readers, where)
    return found


def trainer_workers(
    old: ast.Module,
    new: ast.Module,
    module: Module,
    notebook: bool,
    where: Callable[[ast.expr], str],
) -> list[Violation]:
    """`dataloader_num_workers` added where the Trainer's `.train()` is not surely guarded."""
    before = [c for n in ("TrainingArguments", "Seq2SeqTrainingArguments") for c in calls(old, n)]
    after = [c for n in ("TrainingArguments", "Seq2SeqTrainingArguments") for c in calls(new, n)]
    if notebook or len(before) != len(after):
        return []
    trains = [
        c
        for c in ast.walk(new)
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == "train"
    ]
    guarded = bool(trains) and all(module.guarded(c) for c in trains)
    return [
        Violation(
            "trainer-workers-unguarded",
            where(call),
            "dataloader_num_workers added where `trainer.train()` runs outside the main guard",
        )
        for was, call in zip(before, after, strict=True)
        if keyword(was, "dataloader_num_workers") is None
        and keyword(call, "dataloader_num_workers") is not None
        and not guarded
    ]


def explicit_args(
    old: ast.Module, new: ast.Module, where: Callable[[ast.expr], str]
) -> list[Violation]:
    """An explicit `set_to_none=` removed or changed: the user chose it."""
    out = []
    for was, now in zip(calls(old, "zero_grad"), calls(new, "zero_grad"), strict=False):
        explicit = keyword(was, "set_to_none") or (was.args[0] if was.args else None)
        kept = keyword(now, "set_to_none") or (now.args[0] if now.args else None)
        if explicit is not None and (kept is None or ast.dump(kept) != ast.dump(explicit)):
            out.append(
                Violation(
                    "explicit-arg",
                    where(now),
                    f"`set_to_none={ast.unparse(explicit)}` removed or changed",
                )
            )
    return out


def autocast_refused(
    old: ast.Module, new: ast.Module, where: Callable[[ast.expr], str]
) -> list[Violation]:
    """An autocast region added in a file that computes a loss autocast refuses: calls
    `binary_cross_entropy`, or calls a name bound to a `BCELoss(...)`."""
    bce = {
        ast.unparse(target)
        for node in ast.walk(old)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and name_of(node.value.func) == "BCELoss"
        for target in node.targets
    }
    refused = next(
        (
            ast.unparse(c.func)
            for c in ast.walk(old)
            if isinstance(c, ast.Call)
            and (name_of(c.func) == "binary_cross_entropy" or ast.unparse(c.func) in bce)
        ),
        None,
    )
    if refused is None:
        return []
    return [
        Violation(
            "autocast-refused",
            where(call),
            f"autocast added in a file that calls `{refused}`, a loss autocast refuses",
        )
        for call in calls(new, "autocast")[len(calls(old, "autocast")) :]
    ]


def changed_lines(before: str, after: str) -> set[int]:
    """1-based lines of `after` that a diff shows as inserted or replaced."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    return {
        j + 1
        for tag, _, _, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
        for j in range(j1, j2)
    }


def new_names_and_indentation(
    before: str, after: str, where: Callable[[int], str]
) -> list[Violation]:
    """Names read unbound in `after` more often than in `before` (at the changed lines
    that read them), and mixed-indentation lines that `before` did not have."""
    found: list[Violation] = []
    old, new = undefined_names(before), undefined_names(after)
    changed = changed_lines(before, after)
    if old is not None and new is not None:
        extra = Counter(name for name, _ in new) - Counter(name for name, _ in old)
        for name, count in sorted(extra.items()):
            lines = [line for n, line in new if n == name]
            line = next((x for x in lines if x in changed), lines[0])
            found.append(
                Violation(
                    "undefined-name",
                    where(line),
                    f"`{name}` is read where nothing binds it yet ({count} new)",
                )
            )
    if mixed_indentation(after) > mixed_indentation(before):
        for number, line in enumerate(after.splitlines(), 1):
            if number in changed and mixed_indentation(line):
                found.append(
                    Violation("mixed-indentation", where(number), f"tabs and spaces: {line!r}")
                )
    return found


def bias_reads_of(path: Path) -> list[int]:
    try:
        return bias_reads(ast.parse(path.read_text(encoding="utf-8", errors="replace")))
    except SyntaxError:
        return []


def copy(dirs: list[Path], into: Path) -> list[Path]:
    copies = []
    for d in dirs:
        target = into / d.resolve().name
        shutil.copytree(d, target, copy_function=shutil.copyfile, symlinks=True)
        for root, _, _ in os.walk(target):
            os.chmod(root, 0o755)
        copies.append(target)
    return copies


def fix_copy(
    dirs: list[Path], work: Path, select: list[str]
) -> tuple[list[Violation], int, int, int]:
    """Fix a copy of `dirs` in `work`: the unsafe edits, the files changed, the fixable
    findings `check` reports and the fixes `fix` applies."""
    copies = copy(dirs, work)
    torchlint = [sys.executable, "-m", "torchlint"]
    options = ["--no-cache", "--unsafe-fixes", *select, *map(str, copies)]
    report = ["--output-format", "json", "--exit-zero", "--quiet"]
    checked = subprocess.run(
        [*torchlint, "check", *report, *options], cwd=work, capture_output=True, text=True
    )
    fixable = sum(1 for item in json.loads(checked.stdout or "[]") if item["fix"])
    done = subprocess.run([*torchlint, "fix", *options], cwd=work, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.stderr.write(done.stderr)
    m = FIXED.search(done.stdout)
    applied = int(m.group(1)) if m else 0
    violations: list[Violation] = []
    changed = 0
    for original, fixed in zip(dirs, copies, strict=True):
        for file in sorted(fixed.rglob("*")):
            if file.suffix not in (".py", ".ipynb"):
                continue
            source = original / file.relative_to(fixed)
            if file.read_bytes() == source.read_bytes():
                continue
            changed += 1
            before, labels = program(source)
            after, _ = program(file)
            path = file.relative_to(work).as_posix()
            neighbours = [
                f"{other.name}:{n}"
                for other in sorted(source.parent.glob("*.py"))
                if other != source
                for n in bias_reads_of(other)
            ]
            violations += check(before, after, labels, path, file.suffix == ".ipynb", neighbours)
    return violations, changed, fixable, applied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path, help="repository folders (default: corpus)")
    parser.add_argument("--keep", action="store_true", help="keep the fixed copy, print its path")
    args = parser.parse_args(argv)
    dirs = args.dirs or default_dirs()
    if not dirs:
        print(
            "fix_safety: no corpus at ../shared/corpus: name directories of real code",
            file=sys.stderr,
        )
        return 2
    failed = False
    for selection, select in SELECTIONS.items():
        work = Path(tempfile.mkdtemp(prefix="torchlint-fix-safety-"))
        try:
            started = time.perf_counter()
            violations, changed, fixable, applied = fix_copy(dirs, work, select)
            seconds = time.perf_counter() - started
        finally:
            if args.keep:
                print(f"fixed copy kept in {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
        print(f"== rules: {selection}, --unsafe-fixes")
        for v in violations:
            print(f"{v.kind:20} {v.where}: {v.message}")
        counts = Counter(v.kind for v in violations)
        names = ", ".join(d.name for d in dirs)
        print(f"fix changed {changed} files of {names} in {seconds:.1f} s")
        ratio = applied / fixable if fixable else 0.0
        print(f"cascade: {applied} fixes applied / {fixable} fixable reported = {ratio:.3f}")
        print(
            ", ".join(f"{kind} {counts[kind]}" for kind in KINDS)
            + f": {len(violations)} unsafe edits\n"
        )
        failed = failed or bool(violations) or applied > CASCADE_LIMIT * fixable
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
