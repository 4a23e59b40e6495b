"""The facts `explain` shows, read off a file's `TorchModule` (what the rules read):
the loops and the function around a line and how often it runs, what the names on it
hold (a device, a model, a DataLoader), where the file puts its work; for a whole file,
its loops, the functions other files call, its models and loaders. Plain data."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import libcst as cst

from torchlint.explain.where import Where
from torchlint.semantic import (
    MISSING,
    CallSite,
    Context,
    DataLoaderSite,
    Device,
    Loop,
    Model,
    ModelSite,
    Scope,
    TorchModule,
)
from torchlint.semantic.external import Callers
from torchlint.text.walk import children

# A program line as reports show it: (cell, line in the cell) in a notebook.
Shown = Callable[[int], tuple[int | None, int]]
LOADER_ARGS = ("batch_size", "num_workers", "pin_memory")
GPU_MODULES = ("torch.cuda.", "torch.accelerator.")
DEVICES = {
    "cuda": "CUDA",
    "accelerator": "an accelerator",
    "cpu": "the CPU",
    "unknown": "a device the analysis cannot name",
}


@dataclass
class At:
    line: int
    cell: int | None = None


@dataclass
class LoaderFacts:
    at: At | None  # where it is built (None: in another file)
    built: str  # "here", or the file that builds it ("pkg/data.py")
    arguments: dict[str, str | None] = field(default_factory=dict)  # as written; None: unset
    trains: bool = False  # a training loop (here or in another file) iterates it
    pinned: bool = False  # pin_memory=True (or pinned where an accelerator is there)


@dataclass
class ModelFacts:
    name: str
    at: At
    origin: str  # built here, passed in by another file, presumed from its use
    builds: str | None  # the class or factory that builds it
    kind: str  # network, loss, stateless
    parameters: int | None  # counted from its layers, or as its pretrained id says
    on_gpu: bool  # moved to a GPU here, or where another file builds or trains it


@dataclass
class LoopFacts:
    at: At
    header: str
    function: str | None
    kind: str  # "training step loop", "training loop", "evaluation loop", "loop"
    loaders: list[LoaderFacts] = field(default_factory=list)  # what it iterates
    per_step: bool = False  # its body runs on every training step
    on_line: bool = False  # the line explained is its header


@dataclass
class FunctionFacts:
    name: str
    at: At
    called_at: list[At] = field(default_factory=list)  # calls of this file
    # How the project's other files call it (`Callers`), and the caller that runs it on
    # every step of training on a GPU, if one does.
    elsewhere: Callers | None = None
    stepped_by: str | None = None


@dataclass
class NameFacts:
    """What an expression on the line holds or does (only what the analysis knows)."""

    expression: str
    device: str | None = None  # the device it names
    moves_to: str | None = None  # `.to(...)`/`.cuda()`: where it moves its receiver
    model: ModelFacts | None = None  # the model it holds
    runs: ModelFacts | None = None  # the model a call runs
    loaders: list[LoaderFacts] = field(default_factory=list)
    calls: str | None = None  # a function of another file of the project it runs


@dataclass
class GpuFacts:
    uses_gpu: bool
    presumed_accelerator: bool
    runs_without_gpu: bool
    why: str


@dataclass
class Facts:
    gpu: GpuFacts
    # At a line:
    function: FunctionFacts | None = None
    class_: str | None = None
    loops: list[LoopFacts] = field(default_factory=list)  # outermost first
    per_step: bool | None = None  # the line runs on every training step
    period: int | None = None  # ... every N steps (0: an N the analysis cannot read)
    grad_disabled: bool = False  # a call on the line runs with autograd off
    names: list[NameFacts] = field(default_factory=list)
    # In the whole file:
    functions: list[FunctionFacts] = field(default_factory=list)
    models: list[ModelFacts] = field(default_factory=list)
    loaders: list[LoaderFacts] = field(default_factory=list)


def line_facts(module: TorchModule, line: int, shown: Shown, where: Where) -> Facts:
    """The facts at a program line (`where`: the positions of what it reads, `at_line`)."""
    return _Reader(module, shown, where).at_line(line)


def file_facts(module: TorchModule, shown: Shown, where: Where) -> Facts:
    """The facts of the whole file (`where`: every node's position, `whole`)."""
    return _Reader(module, shown, where).whole()


def device_text(device: Device) -> str:
    text = DEVICES[device.kind.value] + (f" {device.index}" if device.index is not None else "")
    if device.cpu_path and device.is_gpu:
        text += " where there is one, else the CPU"
    if device.unknown_path:
        text += " (or, on some path, a device the analysis cannot name)"
    return text


class _Reader:
    def __init__(self, module: TorchModule, shown: Shown, where: Where) -> None:
        self.module = module
        self.shown = shown
        self.where = where
        self.positions = where.positions
        self.calls = {id(c.node): c for c in module.calls}
        self.loops = {id(loop.node): loop for loop in module.loops}
        self.sites = {id(s.call.node): s for s in [*module.loaders.sites, *module.loaders.made]}

    def at(self, node: cst.CSTNode) -> At:
        cell, line = self.shown(self.positions[node].start.line)
        return At(line, cell)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.module.code_for_node(node).strip()

    # -- the whole file -----------------------------------------------------------------

    def whole(self) -> Facts:
        m = self.module
        functions = []
        for scope in m.facts.scopes.values():
            if isinstance(scope.node, cst.FunctionDef):
                found = self.function(scope.node)
                if found.elsewhere is not None or found.stepped_by is not None:
                    functions.append(found)
        return Facts(
            self.gpu(),
            loops=[self.loop(loop) for loop in m.loops],
            functions=functions,
            models=[self.model(site) for site in [*m.models.sites, *m.models.passed]],
            loaders=[self.loader(site) for site in [*m.loaders.sites, *m.loaders.made]],
        )

    # -- a line -------------------------------------------------------------------------

    def at_line(self, line: int) -> Facts:
        path = self.path(line)
        facts = Facts(self.gpu())
        if not path:
            return facts
        ctx = self.context(path, line)
        if ctx.function is not None:
            facts.function = self.function(ctx.function)
        if ctx.class_ is not None:
            facts.class_ = ctx.class_.name.value
        statement = path[-1]
        header = not self.in_body(statement, line)
        facts.loops = [self.loop(x, header and x.node is statement) for x in ctx.loops]
        facts.per_step = self.module.runs.per_step(ctx)
        expressions = list(self.on_line(statement, line, ctx.scope))
        calls = [c for n, _ in expressions if (c := self.calls.get(id(n))) is not None]
        periods = [p for c in calls if (p := self.module.runs.period(c)) is not None]
        facts.period = max(periods) if periods else None
        facts.grad_disabled = any(self.module.runs.grad_disabled(c) for c in calls)
        devices = {id(n) for c in calls for n in _device_positions(c)}
        called = {id(c.node.func) for c in calls}  # described by their calls
        seen: list[NameFacts] = []
        for node, scope in expressions:
            found = None if id(node) in called else self.name(node, scope, id(node) in devices)
            if found is None or any(_same(found, other) for other in seen):
                continue
            seen.append(found)
        facts.names = seen
        return facts

    def path(self, line: int) -> list[cst.CSTNode]:
        """The statements around `line`, outermost first (the last: the innermost)."""
        found: list[cst.CSTNode] = []
        block: list[cst.CSTNode] = list(self.where.top)  # (the one that may hold it)
        while True:
            inner = next((s for s in block if self.covers(s, line)), None)
            if inner is None:
                return found
            found.append(inner)
            block = list(_statements(inner))

    def covers(self, node: cst.CSTNode, line: int) -> bool:
        r = self.positions[node]
        return r.start.line <= line <= r.end.line

    def in_body(self, statement: cst.CSTNode, line: int) -> bool:
        """`line` is in the body (or another clause) of a compound statement, below its
        header (`for ... in ...:`, `def f(...):`)."""
        if not isinstance(statement, cst.BaseCompoundStatement):
            return False
        header = [
            self.positions[c].end.line
            for c in children(statement)
            if not isinstance(c, (*_BLOCKS, cst.Decorator, cst.EmptyLine))
        ]
        return line > max(header, default=self.positions[statement].start.line)

    def context(self, path: list[cst.CSTNode], line: int) -> Context:
        """The context of the line's statement, as the semantic walk records it for the
        calls in it: the loops of its function around it, its function and class, the
        `with`s and `if`s around it, its scope."""
        m = self.module
        loops: list[Loop] = []
        function = class_ = None
        withs, ifs = [], []
        scope = m.scope
        for node in path:
            inside = self.in_body(node, line)
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                scope = m.facts.scopes.get(id(node), scope)
                if isinstance(node, cst.FunctionDef):
                    function, loops = node, []  # loops are a function's own
                else:
                    class_ = node
            elif id(node) in self.loops and (inside or node is path[-1]):
                loops.append(self.loops[id(node)])  # (its header: as the walk reads it)
            elif not inside:
                continue
            elif isinstance(node, cst.With):
                withs.append(node)
            elif isinstance(node, cst.If):
                ifs.append(node)
        return Context(
            path[-1] if isinstance(path[-1], cst.BaseStatement) else None,
            tuple(loops),
            function,
            class_,
            tuple(withs),
            tuple(ifs),
            (),
            scope,
        )

    def on_line(
        self, statement: cst.CSTNode, line: int, scope: Scope
    ) -> Iterator[tuple[cst.CSTNode, Scope]]:
        """The expressions of the statement (its header, for a compound one) that span
        `line`, each with the scope it is read in."""
        stack: list[tuple[cst.CSTNode, Scope]] = [(statement, scope)]
        while stack:
            node, where = stack.pop()
            if node is not statement and isinstance(node, _BLOCKS):
                continue
            if not self.covers(node, line):
                continue
            if isinstance(node, (cst.Name, cst.Attribute, cst.Call)):
                yield node, where
            inner = self.module.facts.scopes.get(id(node), where)
            stack.extend((child, inner) for child in reversed(list(children(node))))

    # -- what things are ----------------------------------------------------------------

    def name(self, node: cst.CSTNode, scope: Scope, device: bool) -> NameFacts | None:
        """What an expression holds or does; the device it names where it stands for
        one (`device`: a move's argument, a `device=`, a `torch.device(...)`)."""
        m = self.module
        found = NameFacts(self.code(node))
        named = m.devices.classify(node, scope) if device else None
        found.device = device_text(named) if named is not None else None
        call = self.calls.get(id(node)) if isinstance(node, cst.Call) else None
        if call is not None:
            moved = m.devices.move(call)
            found.moves_to = device_text(moved) if moved is not None else None
            model = m.models.called(call)
            found.runs = self.model(model) if model is not None else None
            site = self.sites.get(id(node))
            found.loaders = [self.loader(site)] if site is not None else []
            external = m.functions.external(call)
            if external is not None:
                found.calls = _function_text(external[0])
        elif isinstance(node, (cst.Name, cst.Attribute)):
            model = m.models.of(node, scope)
            found.model = self.model(model) if model is not None else None
            found.loaders = [self.loader(x) for x in m.loaders.of(node, scope)]
        known = (found.device, found.moves_to, found.model, found.runs, found.calls)
        return found if any(x is not None for x in known) or found.loaders else None

    def function(self, function: cst.FunctionDef) -> FunctionFacts:
        m = self.module
        name = m.functions.local_name(function)
        return FunctionFacts(
            name or function.name.value,
            self.at(function.name),
            [self.at(c.node) for c, _ in m.functions.callers(function)],
            m.runs.outside_callers(function),
            m.env.stepped(name) if name is not None else None,
        )

    def loop(self, loop: Loop, on_line: bool = False) -> LoopFacts:
        m = self.module
        if loop.is_step_loop:
            kind = "training step loop"
        elif loop.is_training:
            kind = "training loop"
        elif loop in m.evaluation_loops:
            kind = "evaluation loop"
        else:
            kind = "loop"
        loaders = []
        if isinstance(loop.node, cst.For):
            for walked in m.loaders.iterables(loop.node.iter, loop.ctx.scope):
                loaders += [self.loader(x) for x in m.loaders.of(walked, loop.ctx.scope)]
        per_step = loop.is_step_loop or m.runs.per_step(loop.ctx)
        node = loop.node
        if isinstance(node, cst.For):
            header = f"for {self.code(node.target)} in {self.code(node.iter)}:"
        else:
            header = f"while {self.code(node.test)}:"
        function = loop.ctx.function.name.value if loop.ctx.function is not None else None
        return LoopFacts(self.at(loop.node), header, function, kind, loaders, per_step, on_line)

    def loader(self, loader: object) -> LoaderFacts:
        m = self.module
        if not isinstance(loader, DataLoaderSite):
            ref = str(getattr(loader, "ref", "another file"))
            file = ref.rpartition("#")[0] or ref  # "pkg/data.py#0": the file's first loader
            return LoaderFacts(None, file, pinned=bool(getattr(loader, "pinned", False)))
        arguments = {}
        for name in LOADER_ARGS:
            value = loader.arg(name)
            arguments[name] = None if value is MISSING else self.code(value)
        return LoaderFacts(
            self.at(loader.call.node),
            "here",
            arguments,
            loader.trains,
            m.loaders.pins_memory(loader),
        )

    def model(self, model: Model) -> ModelFacts:
        m = self.module
        external = model.external
        builds: str | None = None
        if isinstance(model, ModelSite):
            call = model.construction
            origin, builds = "built here", call.qualname or self.code(call.node.func)
            at = self.at(call.node)
        else:
            origin = "built elsewhere"
            if external is not None:
                origin = "presumed from its use" if external.presumed else "from another file"
                builds = external.cls
            at = self.at(model.binding.node)
        parameters = m.networks.estimated_parameters(model) if model.is_network else None
        return ModelFacts(
            model.name, at, origin, builds, model.kind.value, parameters, m.on_gpu(model)
        )

    def gpu(self) -> GpuFacts:
        m = self.module
        why = self.gpu_evidence() if m.placement.uses_gpu else _no_gpu(m)
        return GpuFacts(
            m.placement.uses_gpu,
            m.placement.presumed_accelerator,
            m.placement.runs_without_gpu,
            why,
        )

    def gpu_evidence(self) -> str:
        """What shows the file places work on a GPU (the first of `uses_gpu`'s kinds of
        evidence found, where it is)."""
        m = self.module
        if m.placement.managed and not m.frameworks.cpu_only:
            return "a framework that owns the devices (Lightning, Accelerate, a Trainer)"
        if m.facts.cuda_strings:
            return f'a "cuda" device ({at_text(self.at(m.facts.cuda_strings[0]))})'
        calls = [c for c in m.calls if (c.qualname or "").startswith(GPU_MODULES)]
        calls += m.method_calls("cuda")
        calls += [
            c for c in m.method_calls("to") if (d := m.devices.move(c)) is not None and d.is_gpu
        ]
        calls += [c for c in m.calls if (d := _named(m, c)) is not None and d.is_gpu]
        if calls:
            first = min(calls, key=lambda c: c.order)
            return f"`{self.code(first.node)}` ({at_text(self.at(first.node))})"
        return (
            "its project: another file puts what it builds on a GPU, passes it models on "
            "one, or runs its functions every step of training on one"
        )


# Nodes `on_line` does not enter: a compound statement's body and its other clauses.
_BLOCKS = (cst.BaseSuite, cst.Else, cst.ExceptHandler, cst.Finally, cst.BaseStatement)


def _statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The statements directly inside a compound statement (its bodies and clauses)."""
    stack = list(children(node))
    while stack:
        child = stack.pop()
        if isinstance(child, cst.BaseStatement):
            yield child
        else:
            stack.extend(children(child))


def _function_text(function: object) -> str:
    ref = getattr(function, "ref", "")
    does = [w for w, on in (("steps an optimizer", "steps"), ("runs backward", "backward"),
            ("reads tensors on the host", "syncs")) if getattr(function, on, False)]  # fmt: skip
    return ref + (f" ({', '.join(does)})" if does else "")


def _same(one: NameFacts, other: NameFacts) -> bool:
    """The same expression, or what another says of the same thing (a loader's name and
    its construction)."""
    return one.expression == other.expression or replace(one, expression="") == replace(
        other, expression=""
    )


def _device_positions(call: CallSite) -> Iterator[cst.CSTNode]:
    """The expressions a call reads as a device: a move's first argument, `device=`, a
    `torch.device(...)` itself."""
    if call.qualname == "torch.device":
        yield call.node
    if call.method in ("to", "cuda"):
        yield from [a.value for a in call.node.args if a.keyword is None][:1]
    device = call.kwarg("device")
    if device is not MISSING:
        yield device


def _named(m: TorchModule, call: CallSite) -> Device | None:
    """The device a call's `device=` or a `torch.device(...)` names."""
    device = call.kwarg("device")
    if device is not MISSING:
        return m.devices.classify(device, call.scope)
    return m.devices.classify(call.node, call.scope) if call.qualname == "torch.device" else None


def at_text(at: At) -> str:
    return f"line {at.line}" if at.cell is None else f"cell {at.cell}, line {at.line}"


def _no_gpu(m: TorchModule) -> str:
    """Why the file does not count as placing work on a GPU."""
    why = (
        'no GPU in sight: no "cuda" device, `.cuda()`, `torch.cuda`/`torch.accelerator` '
        "call or move to a GPU, no framework that owns the devices, and no file of its "
        "project uses what it builds on a GPU"
    )
    if m.placement.presumed_accelerator:
        why += (
            "; presumed an accelerator all the same: a training step loop moves its batches "
            "to a device its function receives as a parameter no visible call passes (rules "
            "whose advice is harmless on a CPU report; those whose fix could hurt stay silent)"
        )
    elif m.placement.handles_devices():
        why += "; it places work on a device it does not name (an option, a parameter)"
    return why
