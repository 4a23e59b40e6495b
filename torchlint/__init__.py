"""torchlint: find and fix PyTorch code that leaves the GPU idle.

The names of the public API (`torchlint.api`: `Rule`, `Diagnostic`, `TorchModule`, the
fix types...) are loaded on first use, so `import torchlint` stays cheap."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from torchlint.api import (
        API_VERSION,
        Applicability,
        Diagnostic,
        Fix,
        FixSafety,
        Impact,
        Import,
        InsertAfter,
        InsertBefore,
        Option,
        Remove,
        Replace,
        Rule,
        TorchModule,
        fix,
        statements,
    )

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
    "__version__",
    "fix",
    "statements",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from torchlint import api

        return getattr(api, name)
    raise AttributeError(f"module 'torchlint' has no attribute {name!r}")
