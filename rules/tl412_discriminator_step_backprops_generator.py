"""TL412 discriminator-step-backprops-generator: the discriminator's loss backprops the generator.

What: in a loop (or a function, `def train_step(...)`) that trains two networks with two
optimizers (a GAN: `opt_G` steps the generator G, `opt_D` the discriminator D; which
optimizer trains which network is read from the parameters each is given), the loss
that `opt_D` steps on is computed from D run on G's output without `.detach()` (`fake =
G(z)`, `d_loss = crit(D(fake), zeros)`, `d_loss.backward()`, `opt_D.step()`). The
finding is on that call of D. Left
alone: the fake detached anywhere on its way (`fake.detach()`, `G(z).detach()`,
`fake_det = fake.detach()`, `.data`), built under `torch.no_grad()`, a D backward with
`retain_graph=True` or a D output that another backward (the generator's loss) also
reads (the shared graph is used on purpose), a gradient penalty's path (through
`torch.autograd.grad`) and a fake a penalty differentiates against (WGAN-div's
`autograd.grad(D(fake), fake)`: detaching it would break the penalty), a network no
optimizer of the loop trains, a network both optimizers train (a shared encoder), and
training with one optimizer. Networks held as submodules of one model
(`Adam(model.generator.parameters())`) are one network to it, and not reported.

Why: D's backward pass runs on through the whole generator, computing a gradient for
every generator weight, and `opt_G.zero_grad()` throws them away before the generator's
own step: a full generator backward pass (about twice its forward) wasted every
discriminator step, on a step that should cost only D. Where nothing zeroes G's
gradients between D's backward and G's (`opt_G.zero_grad()` only before D's), they add
to G's own: G is then also trained to lower D's loss, a correctness bug, not only waste.

Bad:
    G = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 784)).cuda()
    D = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()
    opt_G = torch.optim.Adam(G.parameters())
    opt_D = torch.optim.Adam(D.parameters())
    crit = nn.BCEWithLogitsLoss()
    for real, _ in loader:
        real = real.cuda().flatten(1)
        ones = torch.ones(real.size(0), 1, device="cuda")
        zeros = torch.zeros(real.size(0), 1, device="cuda")
        fake = G(torch.randn(real.size(0), 64, device="cuda"))
        d_loss = crit(D(real), ones) + crit(D(fake), zeros)
        opt_D.zero_grad()
        d_loss.backward()
        opt_D.step()
        g_loss = crit(D(fake), ones)
        opt_G.zero_grad()
        g_loss.backward()
        opt_G.step()

Good:
    G = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 784)).cuda()
    D = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 1)).cuda()
    opt_G = torch.optim.Adam(G.parameters())
    opt_D = torch.optim.Adam(D.parameters())
    crit = nn.BCEWithLogitsLoss()
    for real, _ in loader:
        real = real.cuda().flatten(1)
        ones = torch.ones(real.size(0), 1, device="cuda")
        zeros = torch.zeros(real.size(0), 1, device="cuda")
        fake = G(torch.randn(real.size(0), 64, device="cuda"))
        d_loss = crit(D(real), ones) + crit(D(fake.detach()), zeros)
        opt_D.zero_grad()
        d_loss.backward()
        opt_D.step()
        g_loss = crit(D(fake), ones)
        opt_G.zero_grad()
        g_loss.backward()
        opt_G.step()

Fix (sometimes safe): `D(fake)` -> `D(fake.detach())`, on the arguments of D that come
from G. Safe where G's gradients are zeroed (its optimizer's or its own `zero_grad()`,
or a function of the file that calls it) after D's backward and before G's, on every
path that runs G's backward: what D's backward left in G's gradients is then discarded
unread, D's gradients and every value are the same, and only the wasted work goes.
Unsafe where nothing zeroes them in between: the fix removes D's loss from G's update,
which changes (corrects) the training.

Impact: high, whatever the generator's size: the wasted backward is the same share of
a step for a toy (whose step is launch-bound: G's backward kernels are launched for
nothing) as for a large one. Low in a file that places no work on any accelerator (a
CPU script), unless G's gradients are not zeroed (a bug on any device).

Unknown device: a device that cannot be named does not silence it (the backward pass is
wasted on any device); only a file that places no work on an accelerator gets low
impact, as above.

Sources: PyTorch DCGAN tutorial and pytorch/examples dcgan (`netD(fake.detach())`);
PyTorch docs, "Autograd mechanics" (`detach` excludes a subgraph from the backward pass).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.results import Impact
from torchlint.rule import TRAINS, Diagnostic, Rule
from torchlint.semantic import (
    GRAD,
    CallSite,
    Flow,
    Region,
    TorchModule,
    bool_value,
    losses,
    step_regions,
)

CPU = "the file places no work on an accelerator"


class DiscriminatorStepBackpropsGenerator(Rule):
    code = "TL412"
    name = "discriminator-step-backprops-generator"
    fix_safety = FixSafety.SOMETIMES
    tokens = ("backward",)
    pattern = TRAINS

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        on_device = (
            module.placement.uses_gpu
            or module.placement.presumed_accelerator
            or module.placement.handles_devices()
        )
        for region in step_regions(module, lambda steps: _adversarial(module, steps)):
            for found in _Adversarial(module, region).findings():
                yield self._diagnostic(module, found, on_device)

    def _diagnostic(self, module: TorchModule, found: _Finding, on_device: bool) -> Diagnostic:
        code = module.module.code_for_node
        d_call, g_call = found.d_call.node, found.g_call.node
        backward = code(found.d_backward.node)
        zero = f"`{code(found.zero.node)}`" if found.zero is not None else None
        if zero is not None:
            what = (
                f"generator gradients that {zero} then throws away: a full generator "
                "backward pass wasted every discriminator step"
            )
        else:
            what = (
                "generator gradients, and nothing zeroes them before the generator's "
                f"`{code(found.g_backward.node)}`: the generator is also trained on the "
                "discriminator's loss (a correctness bug, not only wasted work)"
            )
        why = CPU if zero is not None and not on_device else None
        detached = _detached(d_call, found.args)
        return self.diagnostic(
            d_call,
            f"`{_short(code(d_call))}` is given the generator's output (`{_short(code(g_call))}`) "
            f"without `.detach()`, so `{_short(backward)}` runs backward through the whole "
            f"generator too, computing {what}; pass "
            + " and ".join(f"`{_short(code(a.value))}.detach()`" for a in found.args)
            + (f" (low impact: {why})" if why else ""),
            fix=fix(
                "Detach the generator's output given to the discriminator",
                Applicability.SAFE if zero is not None else Applicability.UNSAFE,
                Replace(d_call, detached),
            ),
            impact=Impact.LOW if why else Impact.HIGH,
        )


@dataclass
class _Finding:
    d_call: CallSite  # D(fake)
    args: list[cst.Arg]  # its arguments that come from G
    g_call: CallSite  # G(z)
    d_backward: CallSite
    g_backward: CallSite
    zero: CallSite | None  # what zeroes G's gradients between the two backward passes


@dataclass
class _Step:
    """An optimizer step, the networks its optimizer trains and the backward pass
    before it."""

    call: CallSite
    networks: list[int]  # ids of the models
    backward: CallSite
    losses: list[cst.BaseExpression]


def _adversarial(module: TorchModule, steps: list[CallSite]) -> bool:
    """Steps of two optimizers or more, training two networks or more."""
    trains = {id(n) for c in steps for n in module.training.trains(c)}
    optimizers = {tuple(id(n) for n in module.training.trains(c)) for c in steps}
    optimizers.discard(())
    return len(optimizers) >= 2 and len(trains) >= 2


class _Adversarial:
    """The steps of one region and what each backward pass reaches through its data
    flow (`Flow`)."""

    def __init__(self, module: TorchModule, region: Region) -> None:
        self.module = module
        self.region = region
        self.flow = Flow(module, region)
        self.reached = self.flow.reached
        self.rank = self.flow.rank

    # -- the adversarial steps ---------------------------------------------------------

    def steps(self) -> list[_Step]:
        """The optimizer steps of the body whose optimizer trains known networks, each
        with the backward pass before it (not where another step comes between, or the
        pass is a function's)."""
        module = self.module
        found = []
        backwards = {id(c) for c in self.region.backwards}
        events = sorted([*self.region.steps, *self.region.backwards], key=lambda c: c.order)
        last: CallSite | None = None
        for call in events:
            if id(call) in backwards:
                last = call
                continue
            networks = [id(n) for n in module.training.trains(call)]
            if networks and last is not None and last.method == "backward":
                found.append(_Step(call, networks, last, losses(last)))
            last = None
        return found

    def findings(self) -> Iterator[_Finding]:
        steps = self.steps()
        reached = {id(s.backward): self.reached(s.losses, self.rank(s.backward)) for s in steps}
        done: set[int] = set()
        # What a gradient penalty differentiates (`autograd.grad(D(fake), fake)`): its
        # input must keep the generator's graph, a detached copy would not be in it.
        penalized = {
            id(c.node)
            for grad in self.region.calls
            if grad.qualname == GRAD
            for c in self.reached([a.value for a in grad.node.args], self.rank(grad))
        }
        for d in steps:
            if bool_value(d.backward.kwarg("retain_graph")) is True:
                continue  # the graph is kept for another backward pass, on purpose
            others = {  # what another backward pass reads: the shared graph is used
                id(c.node)
                for s in steps
                if s.backward is not d.backward
                for c in reached[id(s.backward)]
            }
            for call in reached[id(d.backward)]:
                model = _model(self.module, call)
                key = id(call.node)
                if key in others or key in done or key in penalized or model not in d.networks:
                    continue
                for g in steps:
                    gs = set(g.networks) - set(d.networks)
                    if g.backward is d.backward or model in g.networks or not gs:
                        continue
                    found = self._fed(call, gs, d, g, penalized)
                    if found is not None:
                        done.add(id(call.node))
                        yield found
                        break

    def _fed(
        self, d_call: CallSite, gs: set[int], d: _Step, g: _Step, penalized: set[int]
    ) -> _Finding | None:
        """The finding on `d_call` where some of its arguments come from a call of G."""
        args, source = [], None
        for arg in d_call.node.args:
            if arg.star:
                return None
            calls = self.reached([arg.value], self.rank(d_call))
            from_g = [c for c in calls if _model(self.module, c) in gs]
            if any(id(c.node) in penalized for c in from_g):
                return None
            if from_g:
                args.append(arg)
                source = source or from_g[0]
        if source is None:
            return None
        zero = self._zeroed(gs, d.backward, g.backward)
        return _Finding(d_call, args, source, d.backward, g.backward, zero)

    def _zeroed(self, gs: set[int], after: CallSite, before: CallSite) -> CallSite | None:
        """A call that zeroes G's gradients after D's backward and before G's, whenever
        G's runs (under no condition G's backward is not under)."""
        for call in self.region.calls:
            if after.order < before.order:
                between = after.order < call.order < before.order
            else:  # G's backward comes first in the body: its next run
                between = call.order > after.order or call.order < before.order
            runs = all(i in before.ctx.ifs for i in call.ctx.ifs)
            if between and runs and self._zeroes(call, gs):
                return call
        return None

    def _zeroes(self, call: CallSite, gs: set[int]) -> bool:
        module = self.module
        if call.method == "zero_grad" and call.receiver is not None:
            site = module.models.of(call.receiver, call.scope)
            trained = {id(n) for n in module.training.trains(call)}
            return bool(trained & gs) or (site is not None and id(site) in gs)
        target = module.functions.target(call)
        if target is None:
            return False
        return any(
            self._zeroes(c, gs) for c in module.training.calls_in(target.function) if c is not call
        )


def _model(module: TorchModule, call: CallSite) -> int | None:
    site = module.models.called(call)
    return id(site) if site is not None else None


def _detached(call: cst.Call, args: list[cst.Arg]) -> cst.Call:
    """`D(fake, labels)` with the arguments that come from G detached."""
    wrap = {id(a) for a in args}
    new = []
    for arg in call.args:
        if id(arg) in wrap:
            value = arg.value
            plain = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)
            if not isinstance(value, plain) and not value.lpar:
                value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            arg = arg.with_changes(
                value=cst.Call(func=cst.Attribute(value=value, attr=cst.Name("detach")))
            )
        new.append(arg)
    return call.with_changes(args=new)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."
