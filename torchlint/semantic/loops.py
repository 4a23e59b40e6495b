"""Training loops, found by what they call: an optimizer step (of a value built by
`torch.optim.*` or a known wrapper, `scaler.step(opt)`, or a function of this file that
does one) and a backward pass. Schedulers are not optimizers; per-step vs per-epoch
follows from which loop runs the step."""

from __future__ import annotations

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.facts import CallSite
from torchlint.semantic.functions import Functions
from torchlint.semantic.models import Models, ModelSite
from torchlint.semantic.scopes import Kind, Scope
from torchlint.semantic.syntax import children, contains, has_modulo

MAX_DEPTH = 4
OPTIMIZER_PREFIXES = ("torch.optim.", "bitsandbytes.optim.", "apex.optimizers.", "timm.optim.")
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

OPTIMIZER, SCALER, OTHER = "optimizer", "scaler", "other"


class Training:
    """Classifies optimizer steps and backward passes, and marks every loop."""

    def __init__(self, facts: Facts, functions: Functions, models: Models) -> None:
        self.facts = facts
        self.functions = functions
        self.models = models
        self._kinds: dict[int, str | None] = {}
        self._does: dict[tuple[int, str], bool] = {}
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
            elif b.kind is Kind.PARAM:
                passed = self.functions.arguments(b)
                if passed is None:
                    kinds.add(None)
                else:
                    kinds.update(self.kind(v, w, _depth + 1) for v, w in passed)
            else:
                kinds.add(None)
        found = kinds.pop() if len(kinds) == 1 else None
        self._kinds[key] = found
        return found

    def _built(self, call: cst.Call, scope: Scope, depth: int) -> str | None:
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
            return OTHER if qualname.startswith("torch.") else None
        cls = self.functions.class_scope(call.func, scope)
        if cls is None:
            return None
        assert isinstance(cls.node, cst.ClassDef) and cls.parent is not None
        if any(cls.parent.resolve(b.value) == "torch.optim.Optimizer" for b in cls.node.bases):
            return OPTIMIZER
        # A class that holds an optimizer (a learning-rate wrapper): its methods step it.
        for symbol in cls.attributes.values():
            for b in symbol.bindings:
                if b.value is not None and self.kind(b.value, b.ctx.scope, depth + 1) == OPTIMIZER:
                    return OPTIMIZER
        return None

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
        return _depth == 0 and self._runs(call, "step")

    def is_backward(self, call: CallSite, _depth: int = 0) -> bool:
        """A backward pass: `.backward()`, `torch.autograd.backward(...)`, or a function of
        this file whose body runs one (one level)."""
        if call.method in BACKWARD_METHODS or call.qualname == "torch.autograd.backward":
            return True
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
        key = (id(target.function), what)
        found = self._does.get(key)
        if found is None:
            test = self.is_step if what == "step" else self.is_backward
            self._does[key] = False  # while computing
            found = self._does[key] = any(
                test(c, 1) for c in self._direct.get(id(target.function), ())
            )
        return found

    # -- models ----------------------------------------------------------------------

    def optimized(self) -> set[int]:
        """ids of the models whose parameters are handed to an optimizer."""
        found: set[int] = set()
        for call in self.facts.calls:
            if call.node.args and self._built(call.node, call.scope, 0) == OPTIMIZER:
                for arg in call.node.args:
                    for site in self.parameters_of(arg.value, call.scope):
                        found.add(id(site))
        return found

    def parameters_of(self, node: cst.CSTNode, scope: Scope) -> list[ModelSite]:
        """Models whose `.parameters()` (or `.named_parameters()`) appear in `node`."""
        out: list[ModelSite] = []
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
                    out.append(site)
                continue
            stack.extend(children(n))
        return out


def is_periodic(site: CallSite) -> bool:
    """The call runs every N steps, not every step: it is in the body (not the `else`) of
    an `if` whose test has a `%` (`if step % 100 == 0:`, `if not i % log_every:`)."""
    return any(has_modulo(if_.test) and contains(if_.body, site.node) for if_ in site.ctx.ifs)
