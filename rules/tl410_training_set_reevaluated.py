"""TL410 training-set-reevaluated: the training set is run through the network again to measure it.

What: inside the loop that repeats training epochs (the loop around the step loop, or
around a call of the function that holds it: `for epoch in range(n): train(epoch)`, or
around a call of another file's function whose step loop walks the loader it is given:
`train_one_epoch(model, train_loader, optimizer)`), the loader the step loop trains on
(as the call passes it, where the function walks a parameter) is walked a second time by
the network without training: a loop over it with no backward pass (an evaluation loop),
a call that hands it to a function of this file whose loop evaluates that parameter, or
to a function of another file named for a measure and given a network
(`compute_accuracy(model, train_loader, device)`, `evaluate(model, train_loader)`); with
ignite, an evaluator run on the trainer's own loader from an `Events.EPOCH_COMPLETED`
handler (`evaluator.run(train_loader)`). Same loader means the same name the step loop
iterates (`enumerate(train_loader)`, `tqdm(train_loader)`); a separate loader over the
training data (a fixed subset, no augmentation) is a choice and is not reported, nor is
a pass behind a flag that is off by default (`if args.train_acc:`), nor one after the
last epoch.

Why: a pass of the network over every training batch is about a third of a training
epoch's GPU work (a forward pass without the backward), and the loader decodes and
copies every batch again: experts listing the problems of real repositories before
any run count it among the first (an epoch that takes 1.3-2x as long for a logging
metric). The training pass already computes every output: accumulated on the device,
its loss and accuracy cost nothing more (they lag the weights by part of an epoch,
which a trend does not mind).

Bad:
    model = torchvision.models.resnet18().cuda()
    train_loader = DataLoader(train_set, batch_size=256, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(90):
        for x, y in train_loader:
            loss = F.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            correct = 0
            for x, y in train_loader:
                correct += (model(x.cuda()).argmax(1) == y.cuda()).sum()

Good:
    model = torchvision.models.resnet18().cuda()
    train_loader = DataLoader(train_set, batch_size=256, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(90):
        correct = torch.zeros((), device="cuda")
        for x, y in train_loader:
            out = model(x.cuda())
            loss = F.cross_entropy(out, y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += (out.argmax(1) == y.cuda()).sum()

Fix: none offered: where the metric comes from is the author's call (accumulate it in
the training pass, measure a fixed subset, or every N epochs).

A pass every N epochs (`if epoch % 10 == 0:`, ignite's `EPOCH_COMPLETED(every=N)`, with N
read from a constant, an argparse default or a `config = locals()` of the launcher's
parameters) is not reported: measuring every few epochs is this rule's own advice.

Impact: high where the training set is walked two times or more each epoch for
measures (accuracy, then loss: one pass would give both). Low for a single pass each
epoch (a metric of the training set many authors choose to log, which the experts
listing problems before any run call debatable) and for passes every N epochs where N
cannot be read.

Unknown device: the pass is repeated work on any device; only code that places no work
on a device (no GPU named or presumed here) is left alone, as a CPU script.

Sources: PyTorch Performance Tuning Guide (avoid unnecessary work in the training
loop); ignite's and PyTorch's examples log the running training loss from the
training pass itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    CallSite,
    Kind,
    Loop,
    Scope,
    Symbol,
    TorchModule,
    argument,
    assigned_once,
    dotted_name,
)

# A function of another file that measures what it is given: `compute_accuracy`,
# `compute_epoch_loss`, `get_metrics`, `evaluate`, `test`...
MEASURE = re.compile(
    r"^_*(?:(?:compute|calc|calculate|get|measure|eval|evaluate)_?\w*"
    r"(?:acc|accuracy|loss|metrics?|scores?|error)|eval|evaluate|validate|test|predict)",
    re.IGNORECASE,
)
EPOCH_COMPLETED = "Events.EPOCH_COMPLETED"
PERIODIC = "every N epochs: a fraction of an epoch's work"
ONE_PASS = "one pass for a metric of the training set each epoch, a choice many make"


class TrainingSetReevaluated(Rule):
    code = "TL410"
    name = "training-set-reevaluated"
    # A training loop of its own, or an ignite trainer run.
    tokens = ("backward", "EPOCH_COMPLETED")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not (module.placement.uses_gpu or module.placement.presumed_accelerator):
            return
        done: set[int] = set()
        for loop in module.step_loops:
            for epoch, trained in _epochs(module, loop):
                if id(epoch) in done or not trained:
                    continue
                done.add(id(epoch))
                stepped = _Step(loop, loop.calls, _called(loop.calls))
                yield from self._report(list(self._passes(module, stepped, epoch, trained)))
        for call, trained in _steps_elsewhere(module):
            epoch = call.ctx.loops[-1]
            if id(epoch) not in done:
                done.add(id(epoch))
                stepped = _Step(None, [call], _given(call))
                yield from self._report(list(self._passes(module, stepped, epoch, trained)))
        yield from self._report(list(self._ignite(module)))

    def _passes(
        self, module: TorchModule, step: _Step, epoch: Loop, trained: set[int]
    ) -> Iterator[_Pass]:
        """The passes over the trained loader in the epoch loop, outside the step loop."""
        for loop in module.evaluation_loops:
            inside = epoch in loop.ctx.loops and step.loop not in loop.ctx.loops
            if inside and _iterated(module, loop) & trained:
                yield _Pass(loop.node, "an evaluation loop", _every(module, loop.calls[:1]))
        inner = {id(c) for c in step.calls}
        for call in epoch.calls:
            if id(call.node) in inner or call.ctx.loops[-1] is not epoch:
                continue
            given = _given(call) & trained
            if given and _measures(module, call, given, step.networks):
                name = dotted_name(call.node.func) or "a helper"
                yield _Pass(call.node, f"`{name}`", _every(module, [call]))

    def _ignite(self, module: TorchModule) -> Iterator[_Pass]:
        """`evaluator.run(train_loader)` in a handler of the trainer's EPOCH_COMPLETED,
        where `trainer.run(train_loader, ...)` trains on the same loader."""
        runs = [c for c in module.method_calls("run") if c.receiver is not None and c.node.args]
        for call in runs:
            handler = call.ctx.function
            loader = _symbol(call.node.args[0].value, call.scope)
            engine = _symbol(call.receiver, call.scope) if call.receiver is not None else None
            if handler is None or loader is None or engine is None:
                continue
            event = _epoch_handler(module, handler)
            if event is None or event[0] is engine:
                continue
            trainer, every = event
            if any(
                _symbol(r.receiver, r.scope) is trainer
                and _symbol(r.node.args[0].value, r.scope) is loader
                for r in runs
                if r.receiver is not None
            ):
                name = dotted_name(call.node.func)
                inner = _every(module, [call])
                yield _Pass(call.node, f"`{name}`", inner if every == 1 else every)

    def _report(self, passes: list[_Pass]) -> Iterator[Diagnostic]:
        """Each pass of one training loop: high where the training set is walked twice
        or more each epoch (one pass would do for every measure), else low."""
        passes = [p for p in passes if p.every < 2]  # every N epochs: the advice itself
        every = [p for p in passes if p.every == 1]
        names = ", ".join(p.what for p in every)
        for p in passes:
            if p.periodic:
                why: str | None = PERIODIC
            elif len(every) == 1:
                why = ONE_PASS
            else:
                why = None
            times = (
                "again every few epochs"
                if p.periodic
                else f"{len(every)} times each epoch"
                if why is None
                else "again each epoch"
            )
            what = names if why is None else p.what
            yield self.diagnostic(
                p.node,
                f"the training loader is run through the network {times} "
                f"({what}) only to measure it: each pass over the training set is about a "
                "third of a training epoch's GPU work, with every batch loaded again; "
                + ("compute every measure in one pass, or better " if why is None else "")
                + "accumulate the loss and accuracy on the device during the training "
                "pass, or measure a fixed subset" + (f" (low impact: {why})" if why else ""),
                impact=Impact.LOW if why else Impact.HIGH,
            )


@dataclass(frozen=True)
class _Step:
    """Where the training step runs: a step loop of this file, or a call of another
    file's function whose loop trains on what it is given (no loop here: None); its
    calls, and the symbols (by id) of what it runs as networks."""

    loop: Loop | None
    calls: list[CallSite]
    networks: set[int]


def _called(calls: list[CallSite]) -> set[int]:
    """The symbols (by id) of the names the step loop calls (`model(x)`)."""
    return {
        id(s)
        for c in calls
        if isinstance(c.node.func, cst.Name) and (s := _symbol(c.node.func, c.scope))
    }


def _given(call: CallSite) -> set[int]:
    """The symbols (by id) of the names a call hands over (`train(model, loader)`)."""
    return {id(s) for a in call.node.args if (s := _symbol(a.value, call.scope)) is not None}


def _steps_elsewhere(module: TorchModule) -> Iterator[tuple[CallSite, set[int]]]:
    """Calls in a loop of a function of another file that trains on a loader it is
    given, one epoch per call (a step loop over the parameter: `train_one_epoch(model,
    train_loader, optimizer)`), with the symbols (by id) of the loaders handed to it."""
    for call in module.calls:
        # an imported function (`from engine import train_one_epoch`), given names; the
        # project says which it defines (a library's are not asked about)
        if not call.ctx.loops or call.method is not None or "." not in (call.qualname or ""):
            continue
        if not any(isinstance(a.value, cst.Name) for a in call.node.args):
            continue
        site = module.functions.site(call.node)
        external = module.functions.external(site) if site is not None else None
        if external is None:
            continue
        function, offset = external
        effects = dict(function.effects)
        trained, index = set(), 0
        for arg in call.node.args:
            if arg.star:
                break
            keyword = arg.keyword.value if arg.keyword is not None else None
            name = function.parameter(index if keyword is None else None, keyword, offset)
            index += keyword is None
            effect = effects.get(name) if name is not None else None
            if effect is not None and effect.steps and not effect.repeated:
                symbol = _symbol(arg.value, call.scope)
                if symbol is not None and module.loaders.of(arg.value, call.scope):
                    trained.add(id(symbol))  # a loader (the model it trains is given too)
        if trained:
            yield call, trained


@dataclass(frozen=True)
class _Pass:
    """A pass of the network over the training loader, only to measure it."""

    node: cst.CSTNode
    what: str  # what walks it: "`compute_accuracy`", "an evaluation loop"
    every: int  # how many epochs apart it runs: 1 each epoch, 0 every N for an N not read

    @property
    def periodic(self) -> bool:
        return self.every != 1


def _symbol(node: cst.BaseExpression, scope: Scope) -> Symbol | None:
    return scope.lookup_expr(node) if isinstance(node, (cst.Name, cst.Attribute)) else None


def _iterated(module: TorchModule, loop: Loop) -> set[int]:
    """The symbols (by id) of what a `for` loop walks (`enumerate(train_loader)`)."""
    return {id(s) for s in _walked(module, loop)}


def _walked(module: TorchModule, loop: Loop) -> list[Symbol]:
    if not isinstance(loop.node, cst.For):
        return []
    found = []
    for it in module.loaders.iterables(loop.node.iter, loop.ctx.scope):
        symbol = _symbol(it, loop.ctx.scope)
        if symbol is not None:
            found.append(symbol)
    return found


def _epochs(module: TorchModule, step: Loop) -> Iterator[tuple[Loop, set[int]]]:
    """The loops that repeat the step loop's epochs, each with the symbols (by id) of the
    loader it trains on as named there: the loop around it in its function; for a step
    loop at the top of a function, the loop around each call of the function in the file
    (`for epoch in range(n): train(model, train_loader)`), a parameter it walks read as
    the argument the call passes."""
    walked = _walked(module, step)
    if step.ctx.loops or not walked:
        if step.ctx.loops:
            yield step.ctx.loops[-1], {id(s) for s in walked}
        return
    function = step.ctx.function
    for call, offset in module.functions.callers(function) if function is not None else ():
        if not call.ctx.loops:
            continue
        named = set()
        for symbol in walked:
            param = symbol.only(Kind.PARAM)
            if param is None:
                named.add(id(symbol))  # a global (`train_loader`): the same name there
                continue
            index = param.index - offset if param.index is not None else None
            passed = argument(call.node, symbol.name, index=index)
            if passed is not MISSING and (given := _symbol(passed, call.scope)) is not None:
                named.add(id(given))
        yield call.ctx.loops[-1], named


def _measures(module: TorchModule, call: CallSite, given: set[int], stepped: set[int]) -> bool:
    """The call hands the loader to a function that runs a network over it without
    training: a loop over that parameter calling a network with no backward pass in it
    (a function of this file), or a
    function of another file named for a measure and given a network too."""
    if module.runs.opt_in(call.ctx, call.node):
        return False
    target = module.functions.target(call)
    if target is not None:
        for loop in module.loops:
            if loop.ctx.function is not target.function or not isinstance(loop.node, cst.For):
                continue
            if loop.backwards or not module.models.network_calls(loop):
                continue  # trains, or runs no network
            for it in module.loaders.iterables(loop.node.iter, loop.ctx.scope):
                symbol = loop.ctx.scope.lookup_expr(it)
                param = symbol.only(Kind.PARAM) if symbol is not None else None
                if param is None or param.index is None:
                    continue
                passed = argument(call.node, param.symbol.name, index=param.index - target.offset)
                if passed is not MISSING and id(_symbol(passed, call.scope)) in given:
                    return True
        return False
    name = dotted_name(call.node.func) or ""
    if not MEASURE.match(name.rpartition(".")[2]):
        return False
    # Given a network: one known as such, or what the step calls (`model(x)` on a
    # parameter `model`) or hands the function that trains.
    return any(
        ((site := module.models.of(a.value, call.scope)) is not None and site.is_network)
        or id(_symbol(a.value, call.scope)) in stepped
        for a in call.node.args
    )


def _every(module: TorchModule, calls: list[CallSite]) -> int:
    """How many epochs apart the first of `calls` runs: 1 each epoch, N under `if epoch %
    N == 0:` (around it or its function's callers), 0 for an N that cannot be read."""
    period = module.runs.period(calls[0]) if calls else None
    return 1 if period is None else period


def _epoch_handler(module: TorchModule, function: cst.FunctionDef) -> tuple[Symbol, int] | None:
    """The engine whose EPOCH_COMPLETED runs `function` (`@trainer.on(Events.EPOCH_COMPLETED)`
    or `trainer.add_event_handler(Events.EPOCH_COMPLETED, function)`), and how many
    epochs apart (`EPOCH_COMPLETED(every=N)`: N, 0 where N cannot be read)."""
    scope = module.functions.scope_of(function).parent
    assert scope is not None
    for decorator in function.decorators:
        on = decorator.decorator
        if (
            isinstance(on, cst.Call)
            and isinstance(on.func, cst.Attribute)
            and on.func.attr.value == "on"
            and on.args
            and (every := _epoch_event(module, on.args[0].value, scope)) is not None
            and (engine := _symbol(on.func.value, scope)) is not None
        ):
            return engine, every
    for call in module.method_calls("add_event_handler"):
        args = call.node.args
        if call.receiver is None or len(args) < 2:
            continue
        handler = args[1].value
        if not (isinstance(handler, cst.Name) and handler.value == function.name.value):
            continue
        every = _epoch_event(module, args[0].value, call.scope)
        engine = _symbol(call.receiver, call.scope)
        if every is not None and engine is not None:
            return engine, every
    return None


def _epoch_event(module: TorchModule, node: cst.BaseExpression, scope: Scope) -> int | None:
    """None unless the event is (or includes) EPOCH_COMPLETED; then how many epochs
    apart it fires: 1, the `every=` of `EPOCH_COMPLETED(every=N)`, 0 for an N (or a
    filter) that cannot be read. `A | B` fires as often as the more frequent."""
    if isinstance(node, cst.Name):  # `validate = Events.EPOCH_COMPLETED(every=3)`
        bound = assigned_once(node, scope)
        if bound is not None and bound.value is not None:
            return _epoch_event(module, bound.value, bound.ctx.scope)
    if isinstance(node, cst.BinaryOperation):  # EPOCH_COMPLETED | COMPLETED
        sides = [_epoch_event(module, n, scope) for n in (node.left, node.right)]
        known = [f for f in sides if f is not None]
        if not known:
            return None
        return 1 if 1 in known else 0 if 0 in known else min(known)
    if isinstance(node, cst.Call):
        if _epoch_event(module, node.func, scope) is None:
            return None
        if not node.args:
            return 1
        every = argument(node, "every")
        found = module.values.constant(every, scope) if every is not MISSING else None
        value = found.value if found is not None else None
        return value if type(value) is int and value > 0 else 0
    name = dotted_name(node) or ""
    return 1 if name.endswith(EPOCH_COMPLETED) else None
