"""Training loops, found by what they call: an optimizer step (of a value built by
`torch.optim.*` or a known wrapper, `scaler.step(opt)`, or a function of this file that
does one) and a backward pass. Schedulers are not optimizers; per-step vs per-epoch
follows from which loop runs the step."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.external import Class, Function, Global
from torchlint.semantic.functions import Functions, given
from torchlint.semantic.models import Model, Models
from torchlint.semantic.portable import OPTIMIZER, SCALER, Value
from torchlint.semantic.scopes import CallSite, Context, Kind, Loop, Scope
from torchlint.semantic.syntax import (
    MISSING,
    contains,
    dotted_name,
    has_modulo,
    int_value,
    names_read,
)
from torchlint.semantic.values import Values
from torchlint.settings import StepFunction
from torchlint.text.walk import children, descendants

MAX_DEPTH = 4
OPTIMIZER_PREFIXES = ("torch.optim.", "bitsandbytes.optim.", "apex.optimizers.", "timm.optim.")
# Other libraries' optimizers and optimizer wrappers, by name: a class of an `optim`
# package (`cherry.optim.Distributed`, `torch_optimizer.RAdam`) or one named for it
# (`hvd.DistributedOptimizer`); not a learning-rate scheduler of such a package.
OPTIMIZER_PACKAGES = frozenset({"optim", "optimizer", "optimizers", "torch_optimizer"})
SCHEDULER_WORDS = ("sched", "lr_", "warmup", "Sched", "LR", "Warmup")
OPTIMIZERS = frozenset(
    {
        "torch.distributed.optim.ZeroRedundancyOptimizer",
        "transformers.AdamW",
        "transformers.Adafactor",
        "transformers.optimization.AdamW",
        "transformers.optimization.Adafactor",
        "timm.optim.create_optimizer_v2",
        "timm.optim.create_optimizer",
    }
)
NOT_OPTIMIZERS = ("torch.optim.lr_scheduler.", "torch.optim.swa_utils.")
GRAD_SCALERS = frozenset({"torch.amp.GradScaler", "torch.cuda.amp.GradScaler"})
GRAD_SCALERS |= {"torch.cpu.amp.GradScaler"}
BACKWARD_METHODS = frozenset({"backward", "manual_backward"})

OTHER = "other"


class Training:
    """Classifies optimizer steps and backward passes, and marks every loop."""

    def __init__(self, facts: Facts, functions: Functions, models: Models, values: Values) -> None:
        self.facts = facts
        self.functions = functions
        self.models = models
        self.values = values
        self._kinds: dict[int, str | None] = {}
        self._does: dict[tuple[int, str], bool] = {}
        # optimizer -> (the models it is given parameters of, each model with the part
        # given: None for its own `.parameters()`, "fc" for `model.fc`'s): `_optimizers`
        self._given: dict[int, tuple[list[Model], list[tuple[Model, str | None]]]] | None = None
        # id(def) -> the calls in its body, and those outside its loops (what one call of it
        # runs once).
        self._all: dict[int, list[CallSite]] = {}
        self._direct: dict[int, list[CallSite]] = {}
        for call in facts.calls:
            if call.ctx.function is not None:
                self._all.setdefault(id(call.ctx.function), []).append(call)
                if not call.ctx.loops:
                    self._direct.setdefault(id(call.ctx.function), []).append(call)
        # Loops (and functions) whose own body, not a nested loop, runs a backward pass.
        self._backward_here: set[int] = set()
        backwards = [c for c in facts.calls if self.is_backward(c)]
        for call in backwards:
            if call.ctx.loops:
                self._backward_here.add(id(call.ctx.loops[-1]))
            if call.ctx.function is not None:
                self._backward_here.add(id(call.ctx.function))
        steps = [c for c in facts.calls if self.is_step(c)]
        for found, attribute in ((steps, "steps"), (backwards, "backwards")):
            for call in found:
                for loop in call.ctx.loops:
                    getattr(loop, attribute).append(call)

    # -- values ----------------------------------------------------------------------

    def kind(self, node: cst.CSTNode, scope: Scope, _depth: int = 0) -> str | None:
        """OPTIMIZER, SCALER, OTHER (a scheduler, any other known value) or None."""
        if _depth > MAX_DEPTH:
            return None
        if isinstance(node, cst.Call):
            return self._built(node, scope, _depth)
        symbol = scope.lookup_expr(node)
        if symbol is None or not symbol.bindings:
            return None
        key = id(symbol)
        if key in self._kinds:
            return self._kinds[key]
        self._kinds[key] = None
        kinds: set[str | None] = set()
        for b in symbol.bindings:
            if b.kind is Kind.ASSIGN and b.value is not None:
                kinds.add(self.kind(b.value, b.ctx.scope, _depth + 1))
            elif b.kind is Kind.ASSIGN and isinstance(b.source, cst.Call) and len(b.path) == 1:
                given = self.values.handed_back(b.source, b.ctx.scope, b.path[0])
                if (
                    isinstance(given, (cst.Name, cst.Attribute))
                    and b.ctx.scope.lookup_expr(given) is symbol
                ):
                    continue  # `self.model, self.opt = accelerator.prepare(..., self.opt)`
                kinds.add(self.kind(given, b.ctx.scope, _depth + 1) if given is not None else None)
            elif b.kind is Kind.PARAM:
                passed = self.functions.arguments(b)
                outside = self.functions.passed(b)  # what the project's other files pass
                if passed is None and outside is None:
                    kinds.add(None)
                kinds.update(self.kind(v, w, _depth + 1) for v, w in passed or ())
                if outside is not None:
                    kinds.add(_kind_of(outside, self.functions))
            elif b.kind is Kind.IMPORT and b.qualname is not None:
                export = self.functions.env.export(b.qualname)
                kinds.add(
                    _kind_of(export.value, self.functions) if isinstance(export, Global) else None
                )
            else:
                kinds.add(None)
        found = kinds.pop() if len(kinds) == 1 else None
        self._kinds[key] = found
        return found

    def built(self, node: cst.BaseExpression, scope: Scope) -> tuple[cst.Call, str] | None:
        """The call that built the optimizer (or grad scaler) an expression holds, and
        OPTIMIZER or SCALER, when all its origins (`Values.origins`: names, parameters,
        what the file's functions return) are that one call."""
        found: dict[int, tuple[cst.Call, str]] = {}
        for value, where in self.values.origins(node, scope):
            kind = self._built(value, where, 0) if isinstance(value, cst.Call) else None
            if not isinstance(value, cst.Call) or kind not in (OPTIMIZER, SCALER):
                return None
            found[id(value)] = (value, kind)
        return next(iter(found.values())) if len(found) == 1 else None

    def stepped(self, call: CallSite) -> cst.Call | None:
        """The call that built the optimizer that `opt.step()`, `opt.zero_grad()`,
        `scaler.step(opt)` or a step function of the project's knowledge (its `optimizer`
        argument) acts on."""
        entry = self.functions.entry(call.node.func, call.scope)
        if isinstance(entry, StepFunction) and entry.optimizer is not None:
            passed = given(call.node, entry.optimizer)
            origin = self.built(passed, call.scope) if passed is not MISSING else None
            return origin[0] if origin is not None and origin[1] == OPTIMIZER else None
        if call.receiver is None:
            return None
        origin = self.built(call.receiver, call.scope)
        if origin is not None and origin[1] == SCALER:
            args = call.node.args
            origin = self.built(args[0].value, call.scope) if args and not args[0].star else None
        return origin[0] if origin is not None and origin[1] == OPTIMIZER else None

    def _built(self, call: cst.Call, scope: Scope, depth: int) -> str | None:
        given = self.values.handed_back(call, scope, None)
        if given is not None:  # `optimizer = accelerator.prepare(optimizer)`
            return self.kind(given, scope, depth + 1)
        qualname = scope.resolve(call.func)
        if qualname is not None:
            if qualname.startswith(NOT_OPTIMIZERS):
                return OTHER
            if qualname in GRAD_SCALERS:
                return SCALER
            last = qualname.rsplit(".", 1)[-1]
            if qualname in OPTIMIZERS or (
                qualname.startswith(OPTIMIZER_PREFIXES) and last[:1].isupper()
            ):
                return OPTIMIZER
            if _optimizer_name(qualname):
                return OPTIMIZER
            if qualname.startswith("torch."):
                return OTHER
            export = self.functions.export(call.func, scope)  # another file of the project
            if isinstance(export, Class):
                return OPTIMIZER if export.optimizer else None
            returns = export.returns if isinstance(export, Function) else None
            return _kind_of(returns, self.functions) if returns is not None else None
        cls = self.functions.class_scope(call.func, scope)
        return OPTIMIZER if cls is not None and self.optimizer_class(cls, depth) else None

    def optimizer_class(self, cls: Scope, _depth: int = 0) -> bool:
        """An optimizer class of this file, or a class holding one (a learning-rate
        wrapper: its methods step it)."""
        assert isinstance(cls.node, cst.ClassDef) and cls.parent is not None
        if any(cls.parent.resolve(b.value) == "torch.optim.Optimizer" for b in cls.node.bases):
            return True
        for symbol in cls.attributes.values():
            for b in symbol.bindings:
                if b.value is not None and self.kind(b.value, b.ctx.scope, _depth + 1) == OPTIMIZER:
                    return True
        return False

    # -- calls -----------------------------------------------------------------------

    def is_step(self, call: CallSite, _depth: int = 0) -> bool:
        """An optimizer step: `opt.step()`, `scaler.step(opt)`, a function of this file
        whose body does one (one level), or `x.step()` on a value we cannot see in a loop
        (or function) whose own body runs a backward pass."""
        if call.method == "step" and call.receiver is not None:
            kind = self.kind(call.receiver, call.scope)
            if kind in (OPTIMIZER, SCALER):
                return True
            if kind is None and call.node.args:  # `x.step(opt)`: a scaler we cannot see
                return self.kind(call.node.args[0].value, call.scope) == OPTIMIZER
            if kind is None:
                here = call.ctx.loops[-1] if call.ctx.loops else call.ctx.function
                if here is not None and id(here) in self._backward_here:
                    return True
        external = self.functions.external(call)
        if external is not None:
            return external[0].steps
        return _depth == 0 and self._runs(call, "step")

    def is_backward(self, call: CallSite, _depth: int = 0) -> bool:
        """A backward pass: `.backward()`, `torch.autograd.backward(...)`, or a function of
        this file whose body runs one (one level)."""
        if call.method in BACKWARD_METHODS or call.qualname == "torch.autograd.backward":
            return True
        external = self.functions.external(call)
        if external is not None:
            return external[0].backward
        return _depth == 0 and self._runs(call, "backward")

    def calls_in(self, function: cst.FunctionDef) -> list[CallSite]:
        """The calls in a function's body (nested functions excluded), loops included."""
        return self._all.get(id(function), [])

    def _runs(self, call: CallSite, what: str) -> bool:
        """The function of this file that `call` runs does a step/backward once (in its
        body, not in a loop of it: a function that loops over steps is a whole epoch)."""
        target = self.functions.target(call)
        if target is None or target.function is call.ctx.function:
            return False
        return self.does(target.function, what)

    def does(self, function: cst.FunctionDef, what: str) -> bool:
        """Each call of `function` runs an optimizer step ("step") or a backward pass
        ("backward") once: in its body, outside its loops."""
        key = (id(function), what)
        found = self._does.get(key)
        if found is None:
            test = self.is_step if what == "step" else self.is_backward
            self._does[key] = False  # while computing
            found = self._does[key] = any(test(c, 1) for c in self._direct.get(id(function), ()))
        return found

    # -- models ----------------------------------------------------------------------

    def optimized(self, site: Model) -> bool:
        """The model's parameters are handed to an optimizer in this file."""
        return any(s is site for sites, _ in self._optimizers().values() for s in sites)

    def _optimizers(self) -> dict[int, tuple[list[Model], list[tuple[Model, str | None]]]]:
        """id(the call building an optimizer) -> the models whose parameters it is given
        (`Adam(G.parameters())`, param groups, `chain(G.parameters(), D.parameters())`,
        a name bound to them: `params = list(G.parameters())`), and the parts of them
        given (see `trained_parts`); indexed once."""
        if self._given is None:
            self._given = {}
            for call in self.facts.calls:
                if call.node.args and self._built(call.node, call.scope, 0) == OPTIMIZER:
                    sites: list[Model] = []
                    parts: list[tuple[Model, str | None]] = []
                    for arg in call.node.args:
                        held = [(arg.value, call.scope)]
                        if isinstance(arg.value, cst.Name):
                            held = self.values.origins(arg.value, call.scope)
                        for value, scope in held:
                            for site, part in self._owners(value, scope):
                                if site not in sites:
                                    sites.append(site)
                                if (site, part) not in parts:
                                    parts.append((site, part))
                    self._given[id(call.node)] = (sites, parts)
        return self._given

    def trains(self, call: CallSite) -> list[Model]:
        """Which optimizer trains which network: the models whose parameters were given
        to the optimizer that `opt.step()`, `opt.zero_grad()` or `scaler.step(opt)` acts
        on (`opt_G.step()` -> [G]); empty where that optimizer or its parameters are not
        known."""
        built = self.stepped(call)
        return list(self._optimizers().get(id(built), ((), ()))[0]) if built is not None else []

    def trained_parts(self, call: CallSite) -> list[tuple[Model, str | None]]:
        """Of `trains(call)`, each model with the part of it the optimizer was given: None
        for its own `.parameters()`, the submodule's path for `Adam(model.fc.parameters())`
        ("fc": part of `model`)."""
        built = self.stepped(call)
        return list(self._optimizers().get(id(built), ((), ()))[1]) if built is not None else []

    def trained_by_all(self, steps: list[CallSite]) -> set[int] | None:
        """ids of the models the optimizers these steps act on train (whole or in part);
        None where one of those optimizers, or its parameters, cannot be read."""
        found: set[int] = set()
        for step in steps:
            given = self.trains(step)
            if not given:
                return None
            found |= {id(site) for site in given}
        return found

    def parameters_of(self, node: cst.CSTNode, scope: Scope) -> list[Model]:
        """Models whose `.parameters()` (or `.named_parameters()`) appear in `node`."""
        return [site for site, _ in self._owners(node, scope)]

    def models_given(self, call: CallSite) -> list[Model]:
        """The models whose `.parameters()` a call (an optimizer's construction) is given."""
        return [
            site for arg in call.node.args for site in self.parameters_of(arg.value, call.scope)
        ]

    def _owners(self, node: cst.CSTNode, scope: Scope) -> Iterator[tuple[Model, str | None]]:
        """Each model whose parameters appear in `node`, with the part: None for its own
        (`model.parameters()`), a submodule's path (`model.fc.parameters()`: "fc")."""
        stack = [node]
        while stack:
            n = stack.pop()
            if (
                isinstance(n, cst.Call)
                and isinstance(n.func, cst.Attribute)
                and n.func.attr.value in ("parameters", "named_parameters")
            ):
                owner = n.func.value
                while isinstance(owner, cst.Attribute):  # `model.fc.parameters()`
                    site = self.models.of(owner, scope)
                    if site is not None:
                        break
                    owner = owner.value
                site = self.models.of(owner, scope)
                if site is not None:
                    part = dotted_name(n.func.value) or ""
                    prefix = (dotted_name(owner) or "") + "."
                    yield site, part[len(prefix) :] if part.startswith(prefix) else None
                continue
            stack.extend(children(n))


def _kind_of(value: Value | None, functions: Functions) -> str | None:
    """OPTIMIZER or SCALER for a value another file passes or exports."""
    if value is None:
        return None
    if value.optimizer is not None:
        return value.optimizer
    cls = functions.env.export(value.instance) if value.instance is not None else None
    return OPTIMIZER if isinstance(cls, Class) and cls.optimizer else None


class Placed(Protocol):
    """A node and where it sits: a call, or a binding (`running += loss.data[0]`)."""

    @property
    def ctx(self) -> Context: ...

    @property
    def node(self) -> cst.CSTNode: ...


def is_periodic(site: Placed) -> bool:
    """The call runs every N steps or on a few steps, not every step: it is in the body
    (not the `else`) of an `if` whose test has a `%` (`if step % 100 == 0:`, `if not i %
    log_every:`), or compares a counter with an int: below a small bound (`if ni < 3:`,
    the first batches), or equal to one value (`if i == 0:`, `if i == len(loader) - 1:`,
    once per loop), or fills a container (`if len(pool) < size: pool.append(x)`: until it
    is full); or it is in such a test after an `and` that has a `%` (`if step % 100
    == 0 and loss.isnan():` tests the loss every 100 steps)."""
    return any(
        (
            (has_modulo(if_.test) or (_few(if_.test) and _counts_passes(site, if_)) or _fills(if_))
            and contains(if_.body, site.node)
        )
        or _gated_by_modulo(if_.test, site.node)
        for if_ in site.ctx.ifs
    )


def _fills(if_: cst.If) -> bool:
    """`if len(buffer) < size:` whose body adds to `buffer` (an image pool or a replay
    buffer filling up): it opens until the container is full, then never."""
    test = if_.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    (right,) = test.comparisons
    if isinstance(right.operator, (cst.LessThan, cst.LessThanEqual)):
        measured = test.left
    elif isinstance(right.operator, (cst.GreaterThan, cst.GreaterThanEqual)):
        measured = right.comparator
    else:
        return False
    if not (
        isinstance(measured, cst.Call)
        and dotted_name(measured.func) == "len"
        and len(measured.args) == 1
    ):
        return False
    container = dotted_name(measured.args[0].value)
    return container is not None and any(
        (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in ("append", "extend", "insert")
            and dotted_name(node.func.value) == container
        )
        or (isinstance(node, cst.AugAssign) and dotted_name(node.target) == container)
        for node in descendants(if_.body)
    )


def _gated_by_modulo(test: cst.BaseExpression, node: cst.CSTNode) -> bool:
    """`node` is evaluated only when an `and`'s left operand with a `%` is true."""
    if not isinstance(test, cst.BooleanOperation):
        return False
    if isinstance(test.operator, cst.And) and has_modulo(test.left) and contains(test.right, node):
        return True
    return _gated_by_modulo(test.left, node) or _gated_by_modulo(test.right, node)


def _counts_passes(site: Placed, if_: cst.If) -> bool:
    """The innermost loop around the `if` trains and the name the gate compares changes
    as the loops run (their target, or bound in them: `if i == 0:`, `if self.step < 3:`):
    the gate counts passes. Not in a retry loop inside a step (`if attempt == 1:` opens
    every step), nor for a name no loop changes (`if args.rank == 0:` is every pass)."""
    around = [loop for loop in site.ctx.loops if contains(loop.node, if_)]
    if not around or not around[-1].is_training:
        return False
    assert isinstance(if_.test, cst.Comparison)
    name = dotted_name(if_.test.left)
    return any(name in _bound_in(loop.node) for loop in around)


def _bound_in(loop: cst.For | cst.While) -> set[str | None]:
    """The names and attributes a loop binds: its target, and what its body assigns."""
    targets: list[cst.BaseExpression] = [loop.target] if isinstance(loop, cst.For) else []
    for node in descendants(loop.body):
        if isinstance(node, cst.Assign):
            targets.extend(t.target for t in node.targets)
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor)):
            targets.append(node.target)
    found: set[str | None] = set()
    while targets:
        target = targets.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            targets.extend(e.value for e in target.elements)
        else:
            found.add(dotted_name(target))
    return found


FEW = 10  # `if step < FEW:` opens on the first steps only


def _few(test: cst.BaseExpression) -> bool:
    """`name < N` / `name <= N` with an int literal N of at most FEW, or `name == value`
    with an int literal or `len(...) - k`: an `if` that opens on a few passes."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    left, (target,) = test.left, test.comparisons
    if not isinstance(left, (cst.Name, cst.Attribute)):
        return False
    bound = int_value(target.comparator)
    if isinstance(target.operator, (cst.LessThan, cst.LessThanEqual)):
        return bound is not None and 0 <= bound <= FEW
    if not isinstance(target.operator, cst.Equal):
        return False
    right = target.comparator
    last = (
        isinstance(right, cst.BinaryOperation)
        and isinstance(right.operator, cst.Subtract)
        and isinstance(right.left, cst.Call)
        and isinstance(right.left.func, cst.Name)
        and right.left.func.value == "len"
    )
    return bound is not None or last


EXITS = ("sys.exit", "exit", "quit", "os._exit")


def runs_once(site: Placed, loop: cst.For | cst.While | None = None) -> bool:
    """The call is in the body of an `if` whose branch ends the run (`raise`,
    `sys.exit(...)`) or, inside `loop` and no loop nested in it, leaves that loop
    (`break`): `if not torch.isfinite(loss): print(loss.item()); sys.exit(1)` runs at most
    once."""
    for if_ in site.ctx.ifs:
        if not contains(if_.body, site.node) or (loop is not None and not contains(loop, if_)):
            continue
        if _ends(if_.body, site, breaks=loop is not None and _innermost(site, if_, loop)):
            return True
    return False


def _innermost(site: Placed, if_: cst.If, loop: cst.For | cst.While) -> bool:
    """No loop between `loop` and the `if`: a `break` in the `if` leaves `loop`."""
    return not any(
        inner.node is not loop and contains(loop, inner.node) and contains(inner.node, if_)
        for inner in site.ctx.loops
    )


def _ends(block: cst.BaseSuite, site: Placed, breaks: bool) -> bool:
    """A statement of the block (not nested) raises, exits or, with `breaks`, breaks."""
    if not isinstance(block, cst.IndentedBlock):
        return False
    for statement in block.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Raise) or (breaks and isinstance(small, cst.Break)):
                return True
            if (
                isinstance(small, cst.Expr)
                and isinstance(small.value, cst.Call)
                and site.ctx.scope.resolve(small.value.func) in EXITS
            ):
                return True
    return False


def names_tested(loop: Loop) -> set[str]:
    """Names read in the tests of the `if`/`while` statements of the loop's body."""
    names: set[str] = set()
    stack: list[cst.CSTNode] = list(loop.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.If, cst.While)):
            names.update(names_read(node.test))
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        stack.extend(children(node))
    return names


def _optimizer_name(qualname: str) -> bool:
    """Another library's optimizer class, by its name (`OPTIMIZER_PACKAGES`)."""
    *packages, last = qualname.split(".")
    if not last[:1].isupper() or any(w in qualname for w in SCHEDULER_WORDS):
        return False
    return last.endswith("Optimizer") or bool(OPTIMIZER_PACKAGES & set(packages[1:] or packages))
