"""PyTorch's run-time anti-pattern matcher, run inside the profiled child.

The launcher loads this file by its path (it imports nothing from torchlint: only the
standard library, and torch inside functions). `start` begins a `torch.profiler.profile`
with what the matcher needs (Python stacks, input shapes) right after the script imports
torch; `finish` stops it and runs the pattern classes of `torch.profiler._pattern_matcher`
one by one: not `report_all_anti_patterns`, which keeps one message per pattern and
location and loses the counts. Each match is reported with the Python frames outside
torch that led to it (innermost first, absolute paths), grouped by those frames with a
count and the time of the matched events.

The private module's shape this relies on (`problem` checks it before a run):
  - the classes in PATTERNS, each built as `Class(prof)`, with `skip`, `name`, `url`,
    `eventTreeTraversal()` (every event, in the class's order) and `match(event) -> bool`;
  - events (READS: the attributes `problem` checks on torch._C._profiler's classes) with
    `name`, `tag` (`_EventType`: `PyCall`, `PyCCall`, `TorchOp`), `parent`, `children`,
    `start_time_ns`, `duration_time_ns`; for Python calls `extra_fields.caller.file_name`
    (relative to the longest `sys.path`-like prefix, as
    `torch.profiler.python_tracer._prefix_regex` lists them) and `.line_number`; for ops
    `extra_fields.inputs`, a list (since torch 2.0; 1.13 has one `_Inputs` object) whose
    tensors (`_TensorMetadata`) have a `device` and a `dtype`.
  - A Python call's `name` may be unreadable (UnicodeDecodeError: the name of a module's
    code object freed after its import); such events are skipped and counted.
Where a class says more than it means, its matches are narrowed (`_applies`, `_skipped`):
the CUDA-only patterns count on CUDA tensors only; FP32MatMulPattern on float32 inputs
only (it matches every `aten::mm`), and it is run when the GPU that ran has TF32, not
only when every architecture the build targets has it (no CUDA wheel's list qualifies);
a match inside another of the same pattern counts once (`_outermost`).
Checked on torch 2.13.0, the version the tests install (tests/test_verify_profile.py).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import site
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any, cast

MODULE = "torch.profiler._pattern_matcher"
# The first and last torch releases --profile is checked on (the verifier itself needs
# torch 2.0 or newer: the `verify` extra). A private module: `problem` checks any torch
# by its shape, and names what it lacks.
CHECKED_TORCH = ((2, 0), (2, 13))
# The pattern classes this reports (ForLoopIndexingPattern is left out, as PyTorch's own
# report leaves it out).
PATTERNS = (
    "SynchronizedDataLoaderPattern",
    "GradNotSetToNonePattern",
    "OptimizerSingleTensorPattern",
    "Conv2dBiasFollowedByBatchNorm2dPattern",
    "ExtraCUDACopyPattern",
    "FP32MatMulPattern",
    "MatMulDimInFP16Pattern",
)
# What these say is about CUDA tensors; on others (a CPU-only run) a match means nothing:
# FP32MatMulPattern, for one, is not skipped by a CPU-only torch (its list of CUDA
# architectures is empty) and matches every CPU matmul.
CUDA_ONLY = frozenset({"ExtraCUDACopyPattern", "FP32MatMulPattern", "MatMulDimInFP16Pattern"})
# What is read of the profiler's event classes (torch._C._profiler), by class.
READS = {
    "_ProfilerEvent": (
        *("name", "tag", "parent", "children", "extra_fields", "start_tid"),
        *("start_time_ns", "duration_time_ns"),
    ),
    "_ExtraFields_PyCall": ("caller",),
    "_ExtraFields_PyCCall": ("caller",),
    "_ExtraFields_TorchOp": ("inputs",),
    "_TensorMetadata": ("device", "dtype"),
    "_EventType": ("PyCall", "PyCCall", "TorchOp"),
}
LOADER_NEXT = ("torch", "utils", "data", "dataloader.py")
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launcher.py")
MAX_FRAMES = 16  # frames kept per match, innermost first
MAX_ERROR = 300


class Lost(Exception):
    """The profiling session ended before `finish`: there is nothing to match."""


def checked_range() -> str:
    (a, b), (c, d) = CHECKED_TORCH
    return f"{a}.{b} to {c}.{d}"


def checked_on(version: str) -> bool:
    """Whether --profile is checked on this torch version (`2.13.0+cpu`)."""
    release = tuple(int(n) for n in version.split("+")[0].split(".")[:2])
    return CHECKED_TORCH[0] <= release <= CHECKED_TORCH[1]


def problem() -> str | None:
    """Why this torch cannot be profiled for anti-patterns; None when it can."""
    try:
        with warnings.catch_warnings():  # torch without NumPy says so; verify needs none
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch

        version = torch.__version__
    except Exception as exc:  # a broken install
        return f"torch cannot be imported ({type(exc).__name__}: {exc})"
    try:
        module = importlib.import_module(MODULE)
        events = importlib.import_module("torch._C._profiler")
    except Exception as exc:
        return (
            f"torch {version} has no run-time anti-pattern matcher ({MODULE}: "
            f"{type(exc).__name__}: {exc}); --profile needs a torch that has it "
            f"(checked on torch {checked_range()})"
        )
    missing = [
        name
        for name in PATTERNS
        if not all(
            callable(getattr(getattr(module, name, None), a, None))
            for a in ("match", "eventTreeTraversal")
        )
    ]
    missing += [
        f"{cls}.{name}"
        for cls, names in READS.items()
        for name in names
        if not hasattr(getattr(events, cls, None), name)
    ]
    if hasattr(events, "_Inputs"):  # torch 1.13: `inputs` is one object, not one per input
        missing.append("_ExtraFields_TorchOp.inputs as a list")
    if missing:
        return (
            f"torch {version}'s {MODULE} lacks what --profile reads ({', '.join(missing)}); "
            "please report it with your torch version"
        )
    return None


def prefixes() -> list[str]:
    """The path prefixes the profiler strips from file names, longest first."""
    try:
        from torch.profiler.python_tracer import _prefix_regex

        found: list[str] = list(_prefix_regex())
    except Exception:  # the same list, built as torch builds it
        import torch

        raw = [*site.getsitepackages(), *sys.path, site.getuserbase()]
        raw += [site.getusersitepackages(), os.path.dirname(os.path.dirname(torch.__file__))]
        found = [p + os.sep for p in sorted({os.path.abspath(p) for p in raw}, reverse=True)]
    return sorted(found, key=len, reverse=True)


def start(torch: Any) -> Any:
    """A running profiler, set up as the pattern classes need it."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    prof = profile(activities=activities, with_stack=True, record_shapes=True)
    prof.start()
    return prof


class _Files:
    """Profiler file names (relative to a prefix) to absolute paths, once each."""

    def __init__(self, prefixes: list[str]) -> None:
        self.prefixes = prefixes
        self.cache: dict[str, str] = {}

    def resolve(self, name: str) -> str:
        found = self.cache.get(name)
        if found is None:
            found = name
            if not os.path.isabs(name) and not name.startswith("<"):
                for prefix in self.prefixes:
                    if os.path.exists(prefix + name):
                        found = os.path.normpath(prefix + name)
                        break
            self.cache[name] = found
        return found


def _is_torch(name: str) -> bool:
    return name.startswith("torch" + os.sep)


class _Reader:
    """Frames, names and devices of events, tolerant of unreadable names."""

    def __init__(self, event_type: Any, files: _Files) -> None:
        self.python = (event_type.PyCall, event_type.PyCCall)
        self.files = files

    def caller(self, event: Any) -> tuple[str, int] | None:
        """(file as the profiler names it, line) of a Python call event."""
        if event.tag not in self.python:
            return None
        caller = event.extra_fields.caller
        try:
            return str(caller.file_name), int(caller.line_number)
        except UnicodeDecodeError:  # freed with its code object
            return None

    def frames(self, event: Any) -> list[tuple[str, int]]:
        """The callers outside torch of the event and its parents, innermost first."""
        out: list[tuple[str, int]] = []
        while event is not None and len(out) < MAX_FRAMES:
            where = self.caller(event)
            if where is not None and not _is_torch(where[0]) and not where[0].startswith("<"):
                frame = (self.files.resolve(where[0]), where[1])
                if frame[0] != LAUNCHER and (not out or out[-1] != frame):
                    out.append(frame)
            event = event.parent
        return out


def _name(event: Any) -> str | None:
    try:
        return str(event.name)
    except UnicodeDecodeError:
        return None


def _on_cuda(event: Any, depth: int = 3) -> bool:
    """A tensor input of the event, or of its first `depth` levels of children, is on a
    CUDA device."""
    for tensor in getattr(event.extra_fields, "inputs", None) or ():
        device = getattr(tensor, "device", None)
        if device is not None and str(device).startswith("cuda"):
            return True
    return depth > 0 and any(_on_cuda(child, depth - 1) for child in event.children)


def _applies(name: str, event: Any, torch: Any) -> bool:
    """A match of a CUDA-only pattern counts on CUDA tensors; one of FP32MatMulPattern
    (which matches every `aten::mm`) on float32 ones."""
    if name not in CUDA_ONLY:
        return True
    if name == "FP32MatMulPattern":
        inputs = getattr(event.extra_fields, "inputs", None) or ()
        if not any(getattr(t, "dtype", None) == torch.float32 for t in inputs):
            return False
    return _on_cuda(event)


def _skipped(name: str, pattern: Any, torch: Any) -> bool:
    """The pattern's own `skip`, except FP32MatMulPattern's: it skips unless every
    architecture the torch build targets is Ampere or newer, which no CUDA wheel's list
    is; whether TF32 applies is asked of the GPU the script used instead."""
    if not pattern.skip:
        return False
    if name != "FP32MatMulPattern":
        return True
    try:
        return not (
            torch.version.hip is None
            and torch.cuda.is_initialized()
            and tuple(torch.cuda.get_device_capability()) >= (8, 0)
        )
    except Exception:
        return True


def _walk(roots: list[Any]) -> Any:
    stack = list(reversed(roots))
    while stack:
        event = stack.pop()
        yield event
        stack.extend(reversed(event.children))


def _key(event: Any) -> tuple[int, int, str | None]:
    return int(event.start_tid), int(event.start_time_ns), _name(event)


def _outermost(hits: list[Any]) -> Iterator[Any]:
    """The matches not inside another match: an op dispatched again within itself
    (`aten::conv2d` under autocast) is one call, not two."""
    keys = {_key(e) for e in hits}
    for event in hits:
        parent = event.parent
        while parent is not None and _key(parent) not in keys:
            parent = parent.parent
        if parent is None:
            yield event


class _Groups:
    """Matches grouped by their frames: count and nanoseconds."""

    def __init__(self) -> None:
        self.groups: dict[tuple[tuple[str, int], ...], list[int]] = {}

    def add(self, frames: list[tuple[str, int]], ns: int) -> None:
        entry = self.groups.setdefault(tuple(frames), [0, 0])
        entry[0] += 1
        entry[1] += ns

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {"frames": [list(f) for f in frames], "count": count, "ns": ns}
            for frames, (count, ns) in sorted(self.groups.items(), key=lambda kv: -kv[1][1])
        ]


def _matched(cls: Any, name: str, prof: Any, reader: _Reader, torch: Any) -> dict[str, Any]:
    """What one pattern class (`cls`, None where this torch lacks it) matched, grouped by
    where it was."""
    entry: dict[str, Any] = {"matches": []}
    if cls is None:
        entry["error"] = "not in this torch"
        return entry
    try:
        pattern = cls(prof)
        entry["title"], entry["url"] = str(pattern.name), str(pattern.url)
        if _skipped(name, pattern, torch):
            entry["skipped"] = True
            return entry
        hits = []
        for event in pattern.eventTreeTraversal():
            try:
                hit = pattern.match(event)
            except UnicodeDecodeError:
                continue  # the event's name (or a neighbour's) is unreadable
            if hit and _applies(name, event, torch):
                hits.append(event)
        groups = _Groups()
        for event in _outermost(hits):
            groups.add(reader.frames(event), int(event.duration_time_ns))
        entry["matches"] = groups.to_json()
    except Exception as exc:  # one pattern's failure is reported, the others still run
        entry["error"] = f"{type(exc).__name__}: {exc}"[:MAX_ERROR]
    return entry


def finish(prof: Any, script: str, paths: list[str]) -> dict[str, Any]:
    """Stop the profiler and run the pattern classes: what matched where, what ran.

    `paths`: the profiler's path prefixes when it started (`prefixes()`)."""
    import torch
    from torch._C._profiler import _EventType

    running = getattr(torch.autograd, "_profiler_enabled", lambda: True)()
    prof.stop()
    if not running:  # a profiler of the script's own ended the session
        raise Lost(
            "the script stopped torch.profiler before the end (it runs a profiler of its "
            "own: only one can run at a time); turn its profiler off to use --profile"
        )
    module = importlib.import_module(MODULE)
    files = _Files(paths)
    reader = _Reader(_EventType, files)
    script = os.path.normpath(os.path.abspath(script))
    roots = list(prof.profiler.kineto_results.experimental_event_tree())
    # One pass of our own: the span, the script's lines that made calls (what ran), and
    # the batches the DataLoader iterators produced, by where they were asked for.
    events = unreadable = 0
    first = last = None
    lines: set[int] = set()
    loading = _Groups()
    for event in _walk(roots):
        events += 1
        start = int(event.start_time_ns)
        end = start + int(event.duration_time_ns)
        first = start if first is None else min(first, start)
        last = end if last is None else max(last, end)
        where = reader.caller(event)
        if where is None:
            continue
        if files.resolve(where[0]) == script:
            lines.add(where[1])
        name = _name(event)
        if name is None:
            unreadable += 1
        elif name.endswith(": __next__") and name.startswith(os.path.join(*LOADER_NEXT)):
            loading.add(reader.frames(event), int(event.duration_time_ns))
    found = {n: _matched(getattr(module, n, None), n, prof, reader, torch) for n in PATTERNS}
    cuda, initialized = False, cast(Callable[[], bool], torch.cuda.is_initialized)
    with contextlib.suppress(Exception):
        cuda = bool(initialized())
    return {
        "torch": str(torch.__version__),
        "cuda": cuda,
        "events": events,
        "unreadable": unreadable,
        "span_ns": (last - first) if first is not None and last is not None else 0,
        "lines": sorted(lines),
        "loading": loading.to_json(),
        "patterns": found,
    }
