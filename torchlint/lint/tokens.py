"""Cheap tests of a file's text, before anything is parsed: which rules may have
something to say about it (their tokens and pattern: only the rules' classes are read, a
built-in rule's stand-in has them from the catalog), whether it may tell the rest of its
project something, whether it trains. Imports neither the rules nor libcst."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from torchlint.settings import Knowledge

if TYPE_CHECKING:
    from torchlint.rule import Rule

R = TypeVar("R", bound="Rule | type[Rule]")  # rules, or their classes


def applies(rules: Sequence[R], source: str, knowledge: Knowledge | None = None) -> list[R]:
    """The rules that may have something to say about this text; all of them where it
    names a callable the project's knowledge tells of."""
    if knowledge is not None and knowledge.named_in(source):
        return list(rules)
    return [r for r in rules if _may_apply(r, source)]


def any_applies(rules: Sequence[Rule | type[Rule]], source: str, knowledge: Knowledge) -> bool:
    """Some rule may have something to say about this text (`applies`, stopping early)."""
    if rules and knowledge.named_in(source):
        return True
    return any(_may_apply(r, source) for r in rules)


def _may_apply(rule: Rule | type[Rule], source: str) -> bool:
    return any(_holds(source, token) for token in rule.tokens) and (
        rule.pattern is None or _holds(source, rule.pattern)
    )


# The last text screened, and what each token or pattern searched in it answered: rules
# share tokens, and a file is screened again by the run and by the linter.
_screened: tuple[str, dict[str | re.Pattern[str], bool]] = ("", {})


def _holds(source: str, token: str | re.Pattern[str]) -> bool:
    global _screened
    text, found = _screened
    if text is not source:
        _screened = (source, found := {})
    if token not in found:
        found[token] = token in source if isinstance(token, str) else bool(token.search(source))
    return found[token]


# A file that holds none of these can tell the rest of its project nothing (no network,
# optimizer, loader, dataset, device, step, backward pass, sync or generator to export,
# no function given a network's parameters: an EMA update a training step calls).
TELLING = (
    "Module", "nn.", "Dataset", "DataLoader", "auto_dataloader", "optim", "backward", "step(",
    ".item(", ".cpu(", "tolist(", "numpy(", "synchronize", "yield", "device", "cuda",
    "accelerat", "prepare", "Trainer", "Lightning", "parameters(",
)  # fmt: skip


# A module-level int constant (`BATCH_SIZE = 8`, `NUM_WORKERS: int = 4`): a `config.py`
# tells the files that import it their batch sizes and worker counts.
INT_CONSTANT = re.compile(r"^[A-Z][A-Z0-9_]*\s*(?::\s*int\s*)?=\s*\d", re.MULTILINE)


def may_tell(text: str) -> bool:
    """The file may tell the rest of its project something (a cheap test of its text):
    also a star import, whose names may be what another file needs (a package's
    `__init__.py` of `from .resnet import *` lines)."""
    return (
        any(token in text for token in TELLING)
        or INT_CONSTANT.search(text) is not None
        or STAR_IMPORT.search(text) is not None
    )


# A file that holds one of these trains, evaluates or loads data: what it does depends on
# what the rest of its project gives it. Other files (model definitions, utilities) are
# read on their own, unless the project later passes them something to act on.
ENGAGING = (
    "backward", "training_step", "DataLoader", "auto_dataloader", ".fit(", "prepare(", ".eval()",
)  # fmt: skip


def may_train(text: str, knowledge: Knowledge) -> bool:
    """The file may train, evaluate or load data: a token of it, or a callable the
    project's knowledge names."""
    return any(token in text for token in ENGAGING) or knowledge.named_in(text)


# `from .layers import *`: the names it binds (`nn` among them) are the project's to tell.
STAR_IMPORT = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+\*", re.MULTILINE)


def asks_project(text: str, knowledge: Knowledge) -> bool:
    """The file needs its project to be read: it `may_train`, or it imports `*` from a
    module (a model file's `from .parts import *` binds the `nn` its classes derive from)."""
    return may_train(text, knowledge) or STAR_IMPORT.search(text) is not None
