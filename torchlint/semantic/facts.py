"""The facts the single walk records: where a node sits, calls, loops."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from torchlint.semantic.scopes import Binding, Scope
from torchlint.semantic.syntax import argument, dotted_name, keyword, positional


@dataclass(frozen=True, eq=False)
class Context:
    """Where a node sits: its scope and the statements, loops, withs and ifs around it."""

    statement: cst.BaseStatement | None
    loops: tuple[Loop, ...]  # enclosing loops of the same function, outermost first
    function: cst.FunctionDef | None
    class_: cst.ClassDef | None
    withs: tuple[cst.With, ...]
    ifs: tuple[cst.If, ...]
    decorators: tuple[cst.Decorator, ...]  # of every enclosing function
    scope: Scope


@dataclass(eq=False)
class CallSite:
    node: cst.Call
    ctx: Context
    order: int  # rank in source order among the file's calls
    qualname: str | None = None  # resolved through imports, canonical; None if not imported
    method: str | None = None  # `x.to(...)` -> "to"
    receiver: cst.BaseExpression | None = None  # `x.to(...)` -> x

    def kwarg(self, name: str) -> cst.BaseExpression:
        return keyword(self.node, name)

    def arg(self, name: str, params: tuple[str, ...] = (), index: int | None = None):
        """The argument for parameter `name` (keyword or positional), else MISSING."""
        return argument(self.node, name, params, index)

    @property
    def has_star_args(self) -> bool:
        return any(arg.star for arg in self.node.args)

    @property
    def positional(self) -> list[cst.BaseExpression]:
        return positional(self.node)

    @property
    def scope(self) -> Scope:
        return self.ctx.scope


@dataclass(frozen=True, eq=False)
class Store:
    """`a.b.c = value` where `a.b.c` resolves through the imports to a module attribute
    (`cudnn.benchmark = True` -> `torch.backends.cudnn.benchmark`)."""

    qualname: str
    target: cst.Attribute
    value: cst.BaseExpression
    ctx: Context


@dataclass(eq=False)
class Loop:
    node: cst.For | cst.While
    ctx: Context  # where the loop statement itself is
    calls: list[CallSite] = field(default_factory=list)  # in the body, nested loops included
    inner: list[Loop] = field(default_factory=list)  # loops nested in this one (same function)
    # Names (re)bound in the body, with how many statements bind each: assignments of
    # any shape, inner `for`/`with` targets, walrus; `self.x` targets by their text.
    bound: dict[str, int] = field(default_factory=dict)
    assignments: list[Binding] = field(default_factory=list)  # `x = v`, `x += v` in the body
    # Linked after the walk (see loops.py and loaders.py).
    steps: list[CallSite] = field(default_factory=list)  # optimizer steps in the body
    backwards: list[CallSite] = field(default_factory=list)  # backward passes in the body
    loaders: list = field(default_factory=list)  # DataLoaderSites the `for` iterates

    @property
    def is_training(self) -> bool:
        """Its body runs a backward pass and an optimizer step (directly, in a nested
        loop, or in a function of this file it calls)."""
        return bool(self.steps) and bool(self.backwards)

    @property
    def is_step_loop(self) -> bool:
        """A training loop with no training loop inside it: its body runs once per step."""
        return self.is_training and not any(inner.is_training for inner in self.inner)

    @property
    def losses(self) -> frozenset[str]:
        """What its body backpropagates: the names handed to a `.backward(...)` in it and
        bound in it (`loss = ...; loss.backward()`, `outputs.loss.backward()`,
        `scaler.scale(loss).backward()`, `accelerator.backward(loss)`), whatever the body
        rebinds them to afterwards (`loss = loss.item()`)."""
        names: set[str] = set()
        for call in self.calls:
            if call.method != "backward":
                continue
            candidates = [a.value for a in call.node.args if a.keyword is None]
            receiver = call.receiver
            if isinstance(receiver, cst.Call) and receiver.args:
                candidates.append(receiver.args[0].value)
            elif receiver is not None:
                candidates.append(receiver)
            for candidate in candidates:
                name = dotted_name(candidate)
                if name is not None and name.split(".")[0] in self.bound:
                    names.add(name)
        return frozenset(names)

    @property
    def is_loader_loop(self) -> bool:
        return bool(self.loaders)

    @property
    def is_epoch_loop(self) -> bool:
        """A loop with a loader loop inside it."""
        return any(inner.is_loader_loop for inner in self.inner)

    @property
    def body(self) -> list[cst.BaseStatement]:
        body = self.node.body
        return list(body.body) if isinstance(body, cst.IndentedBlock) else []

    @property
    def target(self) -> cst.BaseAssignTargetExpression | None:
        return self.node.target if isinstance(self.node, cst.For) else None
