"""`torchlint verify --profile`: static findings joined with PyTorch's run-time patterns.

PyTorch reports a pattern where it happened (the loop that iterates a DataLoader, the
`opt.step()` of a single-tensor optimizer, the call of a conv layer), torchlint where the
cause is written (the `DataLoader(...)` call, the optimizer's constructor). Both sides are
mapped to the entity the semantic layer knows (a DataLoader site, an optimizer's
construction, a model site, a statement, the script) and compared there: each static
finding gets a run-time status, and each pattern no finding accounts for is listed as
seen at run time only. The rule <-> pattern table is patterns.py's.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from torchlint.results import Violation
from torchlint.semantic import MISSING, DataLoaderSite, TorchModule
from torchlint.semantic.loaders import Loader
from torchlint.semantic.models import ModelSite
from torchlint.semantic.portable import OPTIMIZER as BUILT_OPTIMIZER
from torchlint.semantic.scopes import CallSite
from torchlint.semantic.syntax import int_value
from torchlint.text.positions import NodePositions
from torchlint.verify.patterns import (
    BY_RULE,
    LOADER,
    MODEL,
    OPTIMIZER,
    PATTERNS,
    SCRIPT,
    STATEMENT,
    Pattern,
)

CONFIRMED, NOT_SEEN, NOT_CHECKABLE = "confirmed", "not seen", "not checkable"


@dataclass(frozen=True)
class Entity:
    kind: str
    key: int  # id() of the node or site; 0 for the script
    label: str
    usage: frozenset[int] = frozenset()  # lines that run when it is used


@dataclass
class FindingRow:
    """A static finding and what the run showed of it."""

    code: str
    name: str
    line: int
    column: int
    message: str
    status: str  # CONFIRMED, NOT_SEEN, NOT_CHECKABLE
    detail: str
    pattern: str | None = None
    entity: str | None = None
    count: int = 0
    ns: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class RuntimeRow:
    """A pattern seen at run time that no static finding accounts for."""

    pattern: str
    label: str
    where: str  # path:line as PyTorch reports it (the first frame outside torch)
    entity: str | None
    count: int
    ns: int
    why: str  # why no finding: no rule, rule not selected, suppressed, left alone, missed

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class CrossCheck:
    script: str
    torch: str
    steps: int
    span_ns: int
    cuda: bool
    findings: list[FindingRow] = field(default_factory=list)
    runtime_only: list[RuntimeRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def share(self, ns: int) -> float | None:
        return ns / self.span_ns if self.span_ns > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "script": self.script,
            "torch": self.torch,
            "steps": self.steps,
            "profiled_s": self.span_ns / 1e9,
            "cuda": self.cuda,
            "findings": [
                {**f.to_json(), "share": self.share(f.ns) if f.ns else None} for f in self.findings
            ],
            "runtime_only": [
                {**r.to_json(), "share": self.share(r.ns) if r.ns else None}
                for r in self.runtime_only
            ],
            "notes": self.notes,
            "patterns": [
                {"class": p.cls, "label": p.label, "rules": list(p.rules), "entity": p.entity}
                for p in PATTERNS
            ],
        }


class Entities:
    """Lines of the script -> the entities the semantic layer knows there."""

    def __init__(self, module: TorchModule) -> None:
        self.module = module
        training = module.training
        heads = [
            (lp, lp.node) for lp in module.loops if isinstance(lp.node, cst.For) and lp.loaders
        ]
        nodes: list[cst.CSTNode] = [c.node for c in module.calls]
        nodes += [n for _, f in heads for n in (f, f.iter)]
        self.positions = NodePositions(module.module, nodes)
        self.calls: list[tuple[int, int, CallSite]] = []
        self.starts: dict[tuple[int, int], list[CallSite]] = {}
        for call in module.calls:
            r = self.positions[call.node]
            self.calls.append((r.start.line, r.end.line, call))
            self.starts.setdefault((r.start.line, r.start.column + 1), []).append(call)
        # Where passes over each loader start: `for` headers and `iter(loader)`.
        self.loader_heads: list[tuple[int, int, list[Loader]]] = []
        for loop, header in heads:
            first = self.positions[header].start.line
            self.loader_heads.append((first, self.positions[header.iter].end.line, loop.loaders))
        for start, end, call in self.calls:
            args = call.node.args
            if call.qualname in ("iter", "next") and args and not args[0].star:
                arg = args[0].value
                if call.qualname == "iter":
                    found = module.loaders.of(arg, call.scope)
                else:  # `next(it)`: where its batches are loaded
                    found = module.loaders.iterator_of(arg, call.scope)
                if found:
                    self.loader_heads.append((start, end, found))
        # Lines using each optimizer (its steps and zero_grad calls) and each model.
        self.optimizer_lines: dict[int, set[int]] = {}
        self.model_lines: dict[int, set[int]] = {}
        for start, end, call in self.calls:
            if call.method in ("step", "zero_grad"):
                built = training.stepped(call)
                if built is not None:
                    self.optimizer_lines.setdefault(id(built), set()).update(range(start, end + 1))
            site = module.models.called(call)
            if site is not None:
                self.model_lines.setdefault(id(site), set()).update(range(start, end + 1))

    # -- entities ------------------------------------------------------------------------

    def loader(self, site: DataLoaderSite) -> Entity:
        line = self.positions[site.call.node].start.line
        name = f" `{site.bound_to}`" if site.bound_to else ""
        usage = {n for a, b, sites in self.loader_heads if site in sites for n in range(a, b + 1)}
        return Entity(LOADER, id(site), f"DataLoader{name} (line {line})", frozenset(usage))

    def optimizer(self, built: cst.Call) -> Entity:
        line = self.positions[built].start.line
        binding = self.module.binding_of(built)
        name = f" `{binding.symbol.name}`" if binding is not None else ""
        usage = frozenset(self.optimizer_lines.get(id(built), ()))
        return Entity(OPTIMIZER, id(built), f"optimizer{name} (line {line})", usage)

    def model(self, site: ModelSite) -> Entity:
        line = self.positions[site.construction.node].start.line
        usage = frozenset(self.model_lines.get(id(site), ()))
        return Entity(MODEL, id(site), f"model `{site.name}` (line {line})", usage)

    def statement(self, call: CallSite) -> Entity:
        node: cst.CSTNode = call.ctx.statement or call.node
        r = self.positions[call.node]
        lines = frozenset(range(r.start.line, r.end.line + 1))
        return Entity(STATEMENT, id(node), f"line {r.start.line}", lines)

    def script(self) -> Entity:
        return Entity(SCRIPT, 0, "the script")

    # -- from a run-time location ----------------------------------------------------

    def at_line(self, line: int) -> list[CallSite]:
        """Calls whose text covers the line, innermost first."""
        found = [(end - start, c.order, c) for start, end, c in self.calls if start <= line <= end]
        return [c for *_, c in sorted(found, key=lambda t: (t[0], -t[1]))]

    def of_frames(self, pattern: Pattern, lines: Sequence[int]) -> list[Entity]:
        """The entities a match happened in, from the script's frames (innermost first):
        the innermost frame that is a use of an entity of the pattern's kind."""
        if pattern.entity == SCRIPT:
            return [self.script()] if lines else []
        for line in lines:
            found = self._at(pattern, line)
            if found:
                return found
        return []

    def _at(self, pattern: Pattern, line: int) -> list[Entity]:
        kind = pattern.entity
        if kind == LOADER:
            sites = [
                s
                for a, b, ss in self.loader_heads
                if a <= line <= b
                for s in ss
                if isinstance(s, DataLoaderSite)
            ]
            sync = [s for s in sites if _maybe_sync(s)]
            return [self.loader(s) for s in dict.fromkeys(sync or sites)]
        calls = self.at_line(line)
        if kind == OPTIMIZER:
            for call in calls:
                if call.method not in ("step", "zero_grad"):
                    continue
                built = self.module.training.stepped(call)
                if built is not None:
                    return [self.optimizer(built)]
                site = self.module.models.of(call.receiver, call.scope) if call.receiver else None
                if isinstance(site, ModelSite):
                    return [self.model(site)]
                return [self.statement(call)]
            return []
        if kind == MODEL:
            models = [m for c in calls if isinstance(m := self.module.models.called(c), ModelSite)]
            preferred = [
                m
                for m in models
                if self.module.resolve(m.construction.node.func, m.construction.scope)
                in pattern.prefer
            ]
            return [self.model(m) for m in (preferred or models)[:1]]
        return [self.statement(calls[0])] if calls else []

    # -- from a static finding -------------------------------------------------------

    def of_finding(self, pattern: Pattern, v: Violation) -> Entity | None:
        """The entity a finding is about: what the call it reports builds or acts on
        (calls starting where the finding does, else those covering its line)."""
        kind = pattern.entity
        if kind == SCRIPT:
            return self.script()
        if kind == MODEL:
            site = self._built_model(v.line)
            if site is not None:
                return self.model(site)
            return next(iter(self._at(pattern, v.line)), None)
        calls = self.starts.get((v.line, v.column)) or self.at_line(v.line)
        if kind == LOADER:
            by_call = {id(s.call): s for s in self.module.loaders.sites}
            loader = next((by_call[id(c)] for c in calls if id(c) in by_call), None)
            return self.loader(loader) if loader is not None else None
        if kind == OPTIMIZER:
            for call in calls:
                origin = self.module.training.built(call.node, call.scope)
                if origin == (call.node, BUILT_OPTIMIZER):  # the constructor itself
                    return self.optimizer(call.node)
            return next(iter(self._at(pattern, v.line)), None)
        return self.statement(calls[0]) if calls else None

    def _built_model(self, line: int) -> ModelSite | None:
        """The innermost model whose construction covers the line."""
        best: tuple[int, ModelSite] | None = None
        for site in self.module.models.sites:
            r = self.positions[site.construction.node]
            if r.start.line <= line <= r.end.line:
                size = r.end.line - r.start.line
                if best is None or size < best[0]:
                    best = (size, site)
        return best[1] if best is not None else None


def _maybe_sync(site: DataLoaderSite) -> bool:
    """Nothing the file shows starts worker processes for this loader."""
    workers = site.arg("num_workers")
    return workers is MISSING or int_value(workers) == 0


@dataclass
class _Seen:
    """Run-time matches of one pattern on one entity."""

    entity: Entity | None
    where: str
    count: int = 0
    ns: int = 0


def _script_lines(frames: Iterable[Sequence[Any]], script: str) -> list[int]:
    return [int(line) for path, line in frames if os.path.normpath(str(path)) == script]


def _where(frames: Sequence[Sequence[Any]], root: str) -> str:
    if not frames:
        return "(no Python frame outside torch)"
    path, line = frames[0]
    shown = os.path.relpath(path, root) if str(path).startswith(root + os.sep) else str(path)
    return f"{shown}:{line}"


Key = tuple[str, int] | str  # an entity's (kind, key), or the location of a match outside


def join(
    profile: dict[str, Any],
    violations: Sequence[Violation],
    module: TorchModule,
    script: str,
    selected: Iterable[str],
    suppressed: Any = None,
) -> CrossCheck:
    """The cross-check of one profile (matcher.py's `profile` event) and the findings of
    the same script (`selected`: the codes the linter ran; `suppressed(code, line)`: the
    script's noqa comments)."""
    script = os.path.normpath(script)
    entities = Entities(module)
    result = CrossCheck(
        script,
        str(profile.get("torch")),
        int(profile.get("steps", 0)),
        int(profile.get("span_ns", 0)),
        bool(profile.get("cuda")),
    )
    seen = _seen(profile, entities, script)
    accounted: set[tuple[str, Key]] = set()
    for v in violations:
        row, confirmed = _finding(v, profile, seen, entities, result.cuda)
        result.findings.append(row)
        if confirmed is not None:
            accounted.add(confirmed)
    for p in PATTERNS:
        for key, entry in seen[p.cls].items():
            if (p.cls, key) not in accounted:
                result.runtime_only.append(
                    RuntimeRow(
                        p.cls,
                        p.label,
                        entry.where,
                        entry.entity.label if entry.entity else None,
                        entry.count,
                        entry.ns,
                        _why(p, entry, entities, set(selected), suppressed),
                    )
                )
    result.notes.extend(_notes(profile, result))
    return result


def _seen(profile: dict[str, Any], entities: Entities, script: str) -> dict[str, dict[Key, _Seen]]:
    """Every match, by pattern and entity; a DataLoader's time is that of its batches."""
    root = os.path.dirname(script)
    seen: dict[str, dict[Key, _Seen]] = {}
    patterns = profile.get("patterns", {})
    for p in PATTERNS:
        groups = seen[p.cls] = {}
        for match in patterns.get(p.cls, {}).get("matches", ()):
            frames = match.get("frames", [])
            where = _where(frames, root)
            found: list[Entity | None] = [*entities.of_frames(p, _script_lines(frames, script))]
            for entity in found or [None]:
                key: Key = (entity.kind, entity.key) if entity is not None else where
                entry = groups.setdefault(key, _Seen(entity, where))
                entry.count += int(match.get("count", 0))
                entry.ns += int(match.get("ns", 0))
    loading: dict[int, int] = {}
    sync = PATTERNS[0]
    for group in profile.get("loading", ()):
        for entity in entities.of_frames(sync, _script_lines(group.get("frames", []), script)):
            loading[entity.key] = loading.get(entity.key, 0) + int(group.get("ns", 0))
    for entry in seen[sync.cls].values():
        if entry.entity is not None and entry.entity.key in loading:
            entry.ns = loading[entry.entity.key]
    return seen


def _finding(
    v: Violation,
    profile: dict[str, Any],
    seen: dict[str, dict[Key, _Seen]],
    entities: Entities,
    cuda: bool,
) -> tuple[FindingRow, tuple[str, Key] | None]:
    """A finding's run-time status, and the match it accounts for."""
    row = FindingRow(v.code, v.name, v.line, v.column, v.message, NOT_CHECKABLE, "")
    p = BY_RULE.get(v.code)
    if p is None:
        row.detail = f"PyTorch's matcher has no pattern for {v.code}"
        return row, None
    row.pattern = p.cls
    entity = entities.of_finding(p, v)
    row.entity = entity.label if entity is not None else None
    state = profile.get("patterns", {}).get(p.cls, {})
    if p.cuda and not cuda:
        row.detail = "the pattern is about CUDA tensors and this run used no GPU"
        return row, None
    if state.get("error") or state.get("skipped"):
        reason = state.get("error") or "PyTorch skips it on this machine"
        row.detail = f"the pattern could not be checked: {reason}"
        return row, None
    if entity is not None:
        key: Key = (entity.kind, entity.key)
        match = seen[p.cls].get(key)
        if match is not None:
            row.status, row.count, row.ns = CONFIRMED, match.count, match.ns
            row.detail = _confirmed(p, match)
            return row, (p.cls, key)
    row.status = NOT_SEEN
    lines = set(range(v.line, v.end_line + 1))
    if entity is not None and entity.kind in (LOADER, OPTIMIZER, MODEL):
        lines = set(entity.usage)
    if lines & set(profile.get("lines", ())):
        row.detail = "it ran, and PyTorch's matcher did not see the pattern"
        if p.narrower:
            row.detail += f" ({p.narrower})"
    else:
        row.detail = "it did not run in the profiled steps"
    return row, None


def _confirmed(p: Pattern, match: _Seen) -> str:
    if p.cls == "SynchronizedDataLoaderPattern":
        passes = "1 pass" if match.count == 1 else f"{match.count} passes"
        return f"{passes} over it loaded batches on the main process"
    return f"matched at {match.where}"


def _why(p: Pattern, entry: _Seen, entities: Entities, selected: set[str], suppressed: Any) -> str:
    if not p.rules:
        return "no torchlint rule for this pattern"
    if entry.entity is None:
        return "outside the script (joined here with the script's own findings)"
    codes = ", ".join(p.rules)
    if not selected & set(p.rules):
        return f"{codes} not selected"
    line = _anchor_line(entry.entity, entities)
    if (
        suppressed is not None
        and line is not None
        and any(suppressed(code, line) for code in p.rules)
    ):
        return f"suppressed by a noqa comment on line {line}"
    reason = None
    if p.cls == "SynchronizedDataLoaderPattern":
        reason = _loader_left_alone(_loader_site(entry.entity, entities), entities.module)
    elif p.cls == "OptimizerSingleTensorPattern" and not entities.module.placement.uses_gpu:
        reason = "the script trains on no GPU"  # TL605: fused kernels pay off on a GPU
    if reason is not None:
        return f"{codes} leaves it alone: {reason}"
    return f"{codes} reported nothing here (a recall gap)"


def _loader_left_alone(site: DataLoaderSite, module: TorchModule) -> str | None:
    """Which of the cases TL201's doc leaves alone this loader is: PyTorch's pattern
    fires on every loader without workers, the rule only where workers pay off."""
    if not module.placement.uses_gpu:
        return "the script trains on no GPU"
    if site.opaque:
        return "its options come from `*args` or a `**` dict the file does not show"
    if not site.feeds_training:
        return "no training loop of the file iterates it"
    if module.datasets.plain_data(site):
        return "its dataset does no work per sample (tensors in memory)"
    if module.datasets.iterable_dataset(site):
        return "its dataset is an IterableDataset"
    return None


def _loader_site(entity: Entity, entities: Entities) -> DataLoaderSite:
    return next(s for s in entities.module.loaders.sites if id(s) == entity.key)


def _anchor_line(entity: Entity, entities: Entities) -> int | None:
    """The line a finding about the entity would be on."""
    if entity.kind == LOADER:
        return entities.positions[_loader_site(entity, entities).call.node].start.line
    if entity.usage:
        return min(entity.usage)
    return None


def _notes(profile: dict[str, Any], result: CrossCheck) -> list[str]:
    out = [
        "time: of the events PyTorch's pattern matched (a DataLoader's: of loading its "
        "batches) and their share of the profiled time, both under the profiler"
    ]
    states = profile.get("patterns", {})
    out.extend(
        f"{p.cls} failed: {states[p.cls]['error']}"
        for p in PATTERNS
        if states.get(p.cls, {}).get("error")
    )
    out.extend(
        f"{p.cls} skipped by PyTorch on this machine ({p.label})"
        for p in PATTERNS
        if states.get(p.cls, {}).get("skipped") and (result.cuda or not p.cuda)
    )
    unchecked = [p.label for p in PATTERNS if p.cuda and not result.cuda]
    if unchecked:
        out.append(f"not checked, this run used no GPU: {'; '.join(unchecked)}")
    single = "OptimizerSingleTensorPattern"
    if not result.cuda and (
        any(r.pattern == single for r in result.runtime_only)
        or any(f.pattern == single and f.status == CONFIRMED for f in result.findings)
    ):
        out.append(
            "on the CPU, PyTorch's optimizers default to the single-tensor implementation; "
            "foreach/fused pays off on a GPU"
        )
    if profile.get("unreadable"):
        out.append(
            f"{profile['unreadable']} profiler event(s) had an unreadable name (a known "
            "PyTorch issue with code freed after an import) and were skipped"
        )
    return out
