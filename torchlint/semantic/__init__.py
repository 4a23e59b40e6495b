"""The PyTorch-aware facts every rule shares, built once per file in one walk.

Modules, each importing only those before it: syntax (pure CST helpers) -> lattice ->
portable (values as other files see them) -> scopes (bindings, resolution; contexts,
calls, loops) -> external (what the project tells a file) -> builder (the walk) ->
functions (calls between the file's functions) -> values (constants, origins) -> threads
(the threads the file starts, the calls that wait) -> devices (the lattice) -> models
(module identity) -> networks (size and shape) -> loops (training steps) -> reaching
(what reaches a loop) -> loaders -> frameworks (Lightning, Hugging Face) -> runs (where
and how often code runs) -> placement (where the file puts work) -> workload (precision,
size, GPUs) -> datasets -> module (`TorchModule`, what rules read) -> batches (data flow
in loader loops) -> sizes (batch sizes) -> flow (a step's data flow) -> gradients
(frozen networks) -> exports (a file's summary).
docs/semantic.md says more. The names below are loaded on first use (`import
torchlint.semantic.external` imports no libcst)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded on first use: the project layer reads summaries without libcst
    from torchlint.semantic.lattice import Device, DeviceKind, ModelKind
    from torchlint.semantic.loaders import DATALOADER, DATALOADER_PARAMS, DataLoaderSite, Elsewhere
    from torchlint.semantic.models import Model, ModelSite
    from torchlint.semantic.module import TorchModule, build
    from torchlint.semantic.scopes import (
        Binding,
        CallSite,
        Context,
        Kind,
        Loop,
        Scope,
        Symbol,
        assigned_once,
        assigned_to,
    )
    from torchlint.semantic.syntax import MISSING
    from torchlint.semantic.values import Constant
    from torchlint.settings import Settings

__all__ = [
    "DATALOADER",
    "DATALOADER_PARAMS",
    "MISSING",
    "Binding",
    "CallSite",
    "Constant",
    "Context",
    "DataLoaderSite",
    "Device",
    "DeviceKind",
    "Elsewhere",
    "Kind",
    "Loop",
    "Model",
    "ModelKind",
    "ModelSite",
    "Scope",
    "Settings",
    "Symbol",
    "TorchModule",
    "assigned_once",
    "assigned_to",
    "build",
]

# Where the names above live (`Settings`: torchlint.settings), looked up in this order.
_SOURCES = ("lattice", "loaders", "models", "module", "scopes", "syntax", "values")


def __getattr__(name: str) -> Any:
    if name in __all__:
        for source in (*(f"torchlint.semantic.{m}" for m in _SOURCES), "torchlint.settings"):
            module = importlib.import_module(source)
            if name in vars(module):
                return vars(module)[name]
    raise AttributeError(f"module 'torchlint.semantic' has no attribute {name!r}")
