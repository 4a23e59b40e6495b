"""The public API of torchlint for rules written outside it (local rules, plugins):
what `from torchlint import ...` gives. Stable within an `API_VERSION`: a name here
keeps its meaning and signature; a change that breaks a rule raises the version."""

from torchlint.fixes import (
    Applicability,
    Fix,
    FixSafety,
    Import,
    InsertAfter,
    InsertBefore,
    Remove,
    Replace,
    fix,
    statements,
)
from torchlint.options import Option
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule

API_VERSION = 1

__all__ = [
    "API_VERSION",
    "Applicability",
    "Diagnostic",
    "Fix",
    "FixSafety",
    "Impact",
    "Import",
    "InsertAfter",
    "InsertBefore",
    "Option",
    "Remove",
    "Replace",
    "Rule",
    "TorchModule",
    "fix",
    "statements",
]
