"""Where and how often code runs: under the main guard, under a condition, on one side of a
test of the torch version, behind a flag off by default, with gradients off, on every
training step or every N steps. What the rules ask of a statement's context."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.semantic.external import Callers, Environment
from torchlint.semantic.frameworks import Frameworks
from torchlint.semantic.functions import Functions
from torchlint.semantic.loops import Placed, is_periodic, names_tested
from torchlint.semantic.scopes import CallSite, Context, Scope, assigned_once, assigned_to
from torchlint.semantic.syntax import bool_value, contains, dotted_name, names_read, str_value
from torchlint.semantic.values import Constant, Values
from torchlint.text.walk import children, descendants

# A test of the torch version, or of whether torch has something.
VERSION_TEST = re.compile(r"version|TORCH_\w*\d|hasattr\(\s*torch\b", re.IGNORECASE)


NO_GRAD = ("torch.no_grad", "torch.inference_mode")
SET_GRAD = "torch.set_grad_enabled"


# A flag for measuring or debugging the run, not for running it.
INSTRUMENTATION_FLAG = re.compile(r"sync|profil|timing|time_|bench|debug", re.IGNORECASE)


# Devices other than CUDA a branch may be written for: what runs there does not stall it.
OTHER_BACKENDS = frozenset({"mps", "xla", "xpu", "hpu", "npu", "cpu"})


def _guarding(ctx: Context, node: cst.CSTNode) -> list[cst.If]:
    """The `if` statements around `node` whose body (not their `else`) holds it."""
    return [if_ for if_ in ctx.ifs if contains(if_.body, node)]


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The terms of `a and b and c` (the test itself otherwise)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]


def _branch(statement: cst.CSTNode, node: cst.CSTNode) -> bool:
    """`node` is in a branch of a conditional expression or past the first operand of
    `and`/`or` in the statement's own expressions (nested blocks not searched)."""
    stack = [n for n in children(statement) if not isinstance(n, cst.BaseSuite)]
    while stack:
        n = stack.pop()
        if isinstance(n, cst.IfExp) and (contains(n.body, node) or contains(n.orelse, node)):
            return True
        if isinstance(n, cst.BooleanOperation) and contains(n.right, node):
            return True
        stack.extend(c for c in children(n) if not isinstance(c, cst.BaseSuite))
    return False


def _main_guard(node: cst.If) -> bool:
    """`if __name__ == "__main__":` (either way round)."""
    test = node.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, cst.Equal):
        return False
    sides = [test.left, target.comparator]
    return any(isinstance(s, cst.Name) and s.value == "__name__" for s in sides) and any(
        str_value(s) == "__main__" for s in sides
    )


class Runs:
    """Where a statement of one file runs (see the module's docstring)."""

    def __init__(
        self,
        module: cst.Module,
        notebook: bool,
        functions: Functions,
        values: Values,
        frameworks: Frameworks,
        env: Environment,
    ) -> None:
        self.module = module
        self.notebook = notebook
        self.functions = functions
        self.values = values
        self.frameworks = frameworks
        self.env = env
        self._per_step: dict[tuple[int, ...], bool] = {}

    def conditional(self, ctx: Context, node: cst.CSTNode | None = None, _depth: int = 0) -> bool:
        """The statement of `ctx` (and `node` in it) runs only when a condition holds:
        under an `if` other than the main guard or a test that a GPU is there
        (`if torch.cuda.is_available():`, the premise of every GPU rule), in a branch of
        `a if c else b` or after `c and`/`c or`, or in a function every call of which (in
        this file) is conditional. A function the file never calls is not conditional."""
        if any(not _main_guard(i) and not self._gpu_present(i.test, ctx.scope) for i in ctx.ifs):
            return True
        if node is not None and ctx.statement is not None and _branch(ctx.statement, node):
            return True
        function = ctx.function
        if function is None or _depth > 2 or self.outside_callers(function) is not None:
            return False
        callers = self.functions.callers(function)
        return bool(callers) and all(
            self.conditional(c.ctx, c.node, _depth + 1) for c, _ in callers
        )

    def outside_callers(self, function: cst.FunctionDef) -> Callers | None:
        """How the project's other files call a function of this file (None: they do not,
        or the file is checked alone)."""
        name = self.functions.local_name(function)
        return self.env.callers(name) if name is not None else None

    def _gpu_present(self, test: cst.BaseExpression, scope: Scope) -> bool:
        return isinstance(test, cst.Call) and scope.resolve(test.func) in (
            "torch.cuda.is_available",
            "torch.accelerator.is_available",
        )

    def period(self, call: CallSite, _depth: int = 0) -> int | None:
        """How many steps apart the call runs: the `N` of the `if step % N == 0:` around it
        (an int constant: a literal, a name, an argparse default), or around every call
        of the function it is in (two levels; the least of them); 0 where it runs every
        N steps for an `N` we cannot read; None where it may run every time."""
        periods = [
            p
            for if_ in _guarding(call.ctx, call.node)
            if (p := self._modulus(if_, call.scope)) is not None
        ]
        if periods:
            return max(periods)
        function = call.ctx.function
        if function is None or _depth >= 2:
            return None
        callers = self.functions.callers(function)
        found = [self.period(c, _depth + 1) for c, _ in callers]
        if not found or any(p is None for p in found):
            return None
        return min(p for p in found if p is not None)

    def rare(self, call: Placed) -> bool:
        """The call runs on a few steps only (`is_periodic`), unless the `N` of the
        `if step % N == 0:` around it reads 1 (`log_interval = 1`: every step)."""
        return is_periodic(call) and (not isinstance(call, CallSite) or self.period(call) != 1)

    def _modulus(self, if_: cst.If, scope: Scope) -> int | None:
        """The `N` of a `% N` in the test (0 when it is not an int constant); None
        without one."""
        for node in descendants(if_.test):
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
                found = self.values.constant(node.right, scope)
                value = found.value if found is not None else None
                return value if isinstance(value, int) and not isinstance(value, bool) else 0
        return None

    def disables_grad(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """`torch.no_grad()`, `torch.no_grad`, `torch.inference_mode()` (not `(False)`),
        `torch.set_grad_enabled(False)`, and a project's own wrapper named for one of them
        (yolov5's `@smart_inference_mode()`)."""
        if _named_no_grad(expr.func if isinstance(expr, cst.Call) else expr, scope):
            return True
        if isinstance(expr, cst.Call):
            qualname = scope.resolve(expr.func)
            args = [
                a
                for a in expr.args
                if a.keyword is None or a.keyword.value in ("mode", "orig_func")
            ]
            if qualname in NO_GRAD:
                return not args or bool_value(args[0].value) is not False
            if qualname == SET_GRAD:
                return bool(args) and bool_value(args[0].value) is False
            return False
        return scope.resolve(expr) in NO_GRAD

    def grad_disabled(self, call: CallSite) -> bool:
        """A `with` or decorator around the call disables gradients."""
        if any(self.disables_grad(i.item, call.scope) for w in call.ctx.withs for i in w.items):
            return True
        return any(self.disables_grad(d.decorator, call.scope) for d in call.ctx.decorators)

    def version_guarded(self, call: CallSite) -> bool:
        """`call` runs on one side of a test of the torch version or of what torch has
        (`if _TORCH_GREATER_EQUAL_2_4: ... else: old()`, `new() if hasattr(torch, "amp")
        else old()`): code kept for older releases on purpose."""
        tests = [i.test for i in call.ctx.ifs]
        statement = call.ctx.statement
        if statement is not None:
            tests += [
                e.test
                for e in descendants(statement)
                if isinstance(e, cst.IfExp)
                and (contains(e.body, call.node) or contains(e.orelse, call.node))
            ]
        return any(VERSION_TEST.search(self.module.code_for_node(t)) for t in tests)

    def guarded(
        self,
        ctx: Context,
        node: cst.CSTNode | None = None,
        _depth: int = 0,
        elsewhere: bool = True,
    ) -> bool:
        """`node` (by default the statement of `ctx`) runs only under `if __name__ ==
        "__main__":`, directly or in a function every call of which (in this file and, with
        `elsewhere`, in the project's other files) does: what a spawned DataLoader worker,
        which re-imports the script, never runs (so where workers may be started)."""
        target = node if node is not None else ctx.statement
        if target is not None and any(_main_guard(i) and contains(i.body, target) for i in ctx.ifs):
            return True
        function = ctx.function
        if function is None or _depth > 3 or self.notebook:
            return False
        callers = self.functions.callers(function)
        outside = self.outside_callers(function) if elsewhere else None
        if outside is not None and not outside.guarded:
            return False
        return (bool(callers) or outside is not None) and all(
            self.guarded(c.ctx, c.node, _depth + 1, elsewhere) for c, _ in callers
        )

    def per_step(self, ctx: Context, _depth: int = 0) -> bool:
        """Code here runs on every training step: in a step loop, in the `forward` of a
        network of this file, in Lightning's `training_step`, in a function another file
        of the project calls every step, or in a function called from such code (four
        levels) other than every N steps."""
        key = (id(ctx.function), *map(id, ctx.loops), _depth)
        found = self._per_step.get(key)
        if found is None:
            found = self._per_step[key] = self._runs_per_step(ctx, _depth)
        return found

    def _runs_per_step(self, ctx: Context, _depth: int) -> bool:
        if any(
            loop.is_step_loop or any(o.is_step_loop for o in loop.ctx.loops) for loop in ctx.loops
        ):
            return True
        function = ctx.function
        if function is None or _depth > 4:
            return False
        if function.name.value == "forward" and ctx.class_ is not None:
            return True
        if function in self.frameworks.training_steps:  # Lightning runs it every step
            return True
        name = self.functions.local_name(function)
        if name is not None and self.env.stepped(name) is not None:
            return True
        return any(
            self.per_step(c.ctx, _depth + 1)
            for c, _ in self.functions.callers(function)
            if not is_periodic(c)  # `if step % 100 == 0: sample_images()`
        )

    def kept_off(self, ctx: Context, node: cst.CSTNode) -> Constant | None:
        """The term of an `if` around `node` that the file's constants or defaults make
        false (`if num_gpus > 1:` with `num_gpus = 1`; `if self.ngpu > 1:` with `--ngpu`
        defaulting to 1), as a Constant whose origin says whether an option can turn it
        on ("literal"/"name": dead code); None where no such term is read."""
        for if_ in _guarding(ctx, node):
            for term in _conjuncts(if_.test):
                found = self.values.truth(term, ctx.scope)
                if found is not None and not found.value:
                    return found
        return None

    def other_backend(self, ctx: Context, node: cst.CSTNode) -> bool:
        """`node` runs only on a device other than CUDA: in the body of an `if` whose test
        compares with one of `OTHER_BACKENDS` (`if device.type == "mps":`, `if "xla" in
        dev:`), directly or through a name bound once to such a test (`mps = "mps" in
        device.type`; `if mps:`)."""
        for if_ in _guarding(ctx, node):
            test: cst.BaseExpression = if_.test
            bound = assigned_once(test, ctx.scope) if isinstance(test, cst.Name) else None
            if bound is not None and bound.value is not None:
                test = bound.value
            if (
                isinstance(test, cst.Comparison)
                and len(test.comparisons) == 1
                and isinstance(test.comparisons[0].operator, (cst.Equal, cst.In))
                and {str_value(test.left), str_value(test.comparisons[0].comparator)}
                & OTHER_BACKENDS
            ):
                return True
        return False

    def returned_to_tests(self, function: cst.FunctionDef, call: CallSite) -> bool:
        """The call's value is what `function` returns (`return loss.item()`, or a name
        bound to it and returned: `action = int(q.argmax().item())` ... `return action`),
        and every call of it in the file binds the value to a name the host needs: one
        an `if`/`while` of the loop around that call tests (`loss = self._train_batch(it)`
        ... `if loss > diverge * best: break`), or one handed to an environment's `step`
        (`action = self.get_action(net)`, `self.env.step(action)`: an RL agent acting)."""
        if not self._returned(function, call):
            return False
        callers = self.functions.callers(function)
        for caller, _ in callers:
            loops = caller.ctx.loops
            targets = {n for t in assigned_to(caller) for n in names_read(t)}
            if loops and targets & names_tested(loops[-1]):
                continue
            if not (targets and self._stepped_env(caller, targets)):
                return False
        return bool(callers)

    def _returned(self, function: cst.FunctionDef, call: CallSite) -> bool:
        statement = call.ctx.statement
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            if isinstance(small, cst.Return) and small.value is call.node:
                return True
            if isinstance(small, cst.Assign) and contains(small.value, call.node):
                bound = {n for t in small.targets for n in names_read(t.target)}
                returned = self.functions.returns(function)
                return any(dotted_name(r) in bound for r in returned)
        return False

    def _stepped_env(self, caller: CallSite, targets: set[str]) -> bool:
        """A call in the caller's function hands one of `targets` to an environment's
        `step` (`env.step(action)`, `self.env.step(action)`)."""
        function = caller.ctx.function
        return any(
            c.ctx.function is function
            and "env" in (dotted_name(c.receiver) or "").rpartition(".")[2].lower()
            and any(set(names_read(a.value)) & targets for a in c.node.args)
            for c in self.functions.facts.calls_by_method.get("step", ())
        )

    def opt_in(self, ctx: Context, node: cst.CSTNode, named: bool = False) -> bool:
        """`node` runs only when a flag that is off by default is on: it is in the body of
        an `if` whose test (or a term of its `and`) is an option, config entry or constant
        the file sets to False/None/0 (`if args.synchronize_step:` with
        `action="store_true"`, `DEBUG = False`). With `named`, only a flag whose name says
        it is for timing, profiling or debugging (`args.profile`, not `args.with_tracking`,
        a mode users run with), or a parameter every call of the file leaves or sets off
        (`self.autobalance = autobalance` of `__init__(..., autobalance=False)`: code the
        program runs only if a caller asks)."""
        for if_ in _guarding(ctx, node):
            for term in _conjuncts(if_.test):
                found = self.values.constant(term, ctx.scope)
                if found is None or found.origin == "literal" or found.value:
                    continue
                name = self.module.code_for_node(term)
                off_here = found.origin in ("default", "argument")  # every call: False
                if not named or off_here or INSTRUMENTATION_FLAG.search(name):
                    return True
        return False


def _named_no_grad(func: cst.BaseExpression, scope: Scope) -> bool:
    """A function outside torch named for a no-grad mode (`smart_inference_mode`,
    `no_grad_if(...)`): a wrapper that enters one."""
    name = scope.resolve(func) or dotted_name(func)
    if name is None or name.startswith("torch."):
        return False
    last = name.rpartition(".")[2]
    return "inference_mode" in last or "no_grad" in last
