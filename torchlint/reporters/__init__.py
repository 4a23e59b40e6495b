"""Reporters: pure functions from results to text, one module per output format.

Each module defines `render(results, context) -> str`; none touches a CST.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from torchlint.runner import FileResult

FORMATS = ("text", "full", "concise", "json")
_MODULES = {"text": "text", "full": "text", "concise": "concise", "json": "json_format"}
HUMAN = frozenset({"text", "full", "concise"})  # followed by a summary line
WITH_EDITS = frozenset({"json"})  # show the text edits of each fix

DOCS_URL = "https://github.com/torchlint/torchlint/blob/main/docs/rules/{code}.md"


@dataclass(frozen=True)
class Context:
    color: bool = False
    fix_mode: bool = False  # --fix: the fixable markers and summary change wording
    unsafe: bool = False  # --unsafe-fixes: unsafe fixes count as fixable
    show_fixes: bool = False


def render(fmt: str, results: list[FileResult], context: Context) -> str:
    module = importlib.import_module(f"torchlint.reporters.{_MODULES[fmt]}")
    return module.render(results, context)


def rule_url(code: str) -> str:
    return DOCS_URL.format(code=code)


def fixable(v, context: Context) -> bool:
    return v.fix is not None and (v.fix.applicability == "safe" or context.unsafe)
