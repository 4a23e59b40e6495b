"""The PyTorch-aware facts every rule shares, built once per file in one walk.

Modules, each importing only those before it: syntax (pure CST helpers) -> reads (what
holds a tensor's data) -> lattice -> portable (values as other files see them) -> scopes
(bindings, resolution; contexts, calls, loops) -> external (what the project tells a
file) -> builder (the walk) -> functions (calls between the file's functions) -> values
(constants, origins) -> threads (the threads the file starts, the calls that wait) ->
devices (the lattice) -> models (module identity) -> networks (size and shape) -> loops
(training steps) -> reaching (what reaches a loop) -> spreads (`**` dicts) -> loaders ->
frameworks (Lightning, Hugging Face) -> runs (where and how often code runs) ->
placement (where the file puts work) -> workload (precision, size, GPUs) -> datasets ->
module (`TorchModule`, what rules read) -> batches (data flow in loader loops) -> sizes
(batch sizes) -> host (what the host holds) -> flow (a step's data flow) -> gradients
(frozen networks) -> exports (a file's summary).
docs/semantic.md says more. The names below are what rules read: a rule imports them
from here, never from a submodule (tests/test_layers.py). They are loaded on first use
(`import torchlint.semantic.external` imports no libcst)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # loaded on first use: the project layer reads summaries without libcst
    from torchlint.semantic.batches import (
        Origin,
        batch_copies,
        batch_names,
        blocking_copies,
        derived_from_batch,
        device_move,
        device_object,
        host_read,
        left_on_host,
        numpy_value,
        packed_lengths,
        read_inside,
        read_right_after,
        typed_copies,
        unmoved_batch_tensors,
    )
    from torchlint.semantic.flow import (
        GRAD,
        Flow,
        Region,
        fed_tensors,
        legacy_read,
        legacy_reads,
        loop_tensors,
        losses,
        per_step_functions,
        registered_buffers,
        step_regions,
        tensor_rows,
        under_full_batch,
    )
    from torchlint.semantic.frameworks import hf_trainer, lightning, opaque
    from torchlint.semantic.gradients import Frozen
    from torchlint.semantic.host import cpu_loader, cpu_loop, cpu_tensor, fed_numbers
    from torchlint.semantic.lattice import Device, DeviceKind, ModelKind
    from torchlint.semantic.loader_classes import DATALOADER
    from torchlint.semantic.loaders import (
        DATALOADER_PARAMS,
        DataLoaderSite,
        Elsewhere,
        Loader,
    )
    from torchlint.semantic.loops import Placed, is_periodic, names_tested, runs_once
    from torchlint.semantic.models import Model, ModelSite
    from torchlint.semantic.module import TorchModule, build
    from torchlint.semantic.networks import BILLION, millions, toy
    from torchlint.semantic.reads import formats_tensor, tensor_valued
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
        assigned_values,
        bindings,
        bound_names,
    )
    from torchlint.semantic.sizes import (
        batch_size_of,
        fine_tuned,
        heavy_training,
        per_sample,
        tiny_batches,
        trained_on,
    )
    from torchlint.semantic.syntax import (
        HOST_READS,
        MISSING,
        argument,
        bool_value,
        contains,
        dotted_name,
        int_value,
        is_none,
        keyword,
        names_read,
        positional,
        str_value,
    )
    from torchlint.semantic.threads import Started
    from torchlint.semantic.values import Constant
    from torchlint.settings import Settings

__all__ = [
    "BILLION",
    "DATALOADER",
    "DATALOADER_PARAMS",
    "GRAD",
    "HOST_READS",
    "MISSING",
    "Binding",
    "CallSite",
    "Constant",
    "Context",
    "DataLoaderSite",
    "Device",
    "DeviceKind",
    "Elsewhere",
    "Flow",
    "Frozen",
    "Kind",
    "Loader",
    "Loop",
    "Model",
    "ModelKind",
    "ModelSite",
    "Origin",
    "Placed",
    "Region",
    "Scope",
    "Settings",
    "Started",
    "Symbol",
    "TorchModule",
    "argument",
    "assigned_once",
    "assigned_to",
    "assigned_values",
    "batch_copies",
    "batch_names",
    "batch_size_of",
    "bindings",
    "blocking_copies",
    "bool_value",
    "bound_names",
    "build",
    "contains",
    "cpu_loader",
    "cpu_loop",
    "cpu_tensor",
    "derived_from_batch",
    "device_move",
    "device_object",
    "dotted_name",
    "fed_numbers",
    "fed_tensors",
    "fine_tuned",
    "formats_tensor",
    "heavy_training",
    "hf_trainer",
    "host_read",
    "int_value",
    "is_none",
    "is_periodic",
    "keyword",
    "left_on_host",
    "legacy_read",
    "legacy_reads",
    "lightning",
    "loop_tensors",
    "losses",
    "millions",
    "names_read",
    "names_tested",
    "numpy_value",
    "opaque",
    "packed_lengths",
    "per_sample",
    "per_step_functions",
    "positional",
    "read_inside",
    "read_right_after",
    "registered_buffers",
    "runs_once",
    "step_regions",
    "str_value",
    "tensor_rows",
    "tensor_valued",
    "tiny_batches",
    "toy",
    "trained_on",
    "typed_copies",
    "under_full_batch",
    "unmoved_batch_tensors",
]

# Where the names above live (`Settings`: torchlint.settings), looked up in this order.
_SOURCES = (
    "lattice",
    "loaders",
    "models",
    "module",
    "scopes",
    "syntax",
    "values",
    "batches",
    "flow",
    "frameworks",
    "gradients",
    "host",
    "loops",
    "networks",
    "reads",
    "sizes",
    "threads",
)


def __getattr__(name: str) -> Any:
    if name in __all__:
        for source in (*(f"torchlint.semantic.{m}" for m in _SOURCES), "torchlint.settings"):
            module = importlib.import_module(source)
            if name in vars(module):
                return vars(module)[name]
    raise AttributeError(f"module 'torchlint.semantic' has no attribute {name!r}")
