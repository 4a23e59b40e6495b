"""TL607 compiled-model-unused: `torch.compile` is called, but the eager model still runs.

What: a `torch.compile(model)` whose result nothing uses: a statement of its own
(`torch.compile(model)`: it returns the compiled module and leaves `model` eager, unlike
`model.compile()`), or a name bound to it (`compiled = torch.compile(model)`) that the
file never reads while the training loop goes on calling `model`. And `torch.compile`
called again and again inside a training step loop (or a function it calls every
step): a new compiled wrapper each step, with the guards and recompilations that come
with it.

Why: `torch.compile` does nothing to the module it is given; only calls through what
it returns run the generated kernels. A discarded result pays the import and looks
like an optimisation while every step runs eagerly, kernel by kernel. Compiling inside
the loop makes each step check (and, as guards fail, redo) the compilation.

Bad:
    model = torchvision.models.resnet50().cuda()
    torch.compile(model)
    for x, y in loader:
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    model = torchvision.models.resnet50().cuda()
    model = torch.compile(model)
    for x, y in loader:
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe, for a statement of its own compiling a name): bind the result to that name
(`model = torch.compile(model)`). Unsafe because the model then compiles: the first
steps take longer, code dynamo cannot trace falls back or fails, and results may differ
in the last bits. None for the other shapes: the compiled name is the author's to use;
the compilation is to be moved out of the loop.

Impact: high: the compiled kernels the author asked for never run, or every step pays
for compiling.

Unknown device: not read; compiling pays on any device.

Sources: PyTorch docs, "torch.compile" ("returns the optimized module"),
`torch.nn.Module.compile` (compiles in place); "Introduction to torch.compile".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, Fix, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import CallSite, TorchModule, names_read

COMPILE = "torch.compile"


class CompiledModelUnused(Rule):
    code = "TL607"
    name = "compiled-model-unused"
    fix_safety = FixSafety.UNSAFE
    tokens = ("torch.compile", "import compile")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        calls = module.calls_to(COMPILE)
        if not calls:
            return
        names = Counter(names_read(module.module))  # how often each name appears
        for call in calls:
            statement = call.ctx.statement
            if module.runs.per_step(call.ctx):
                yield self.diagnostic(
                    call.node,
                    "`torch.compile` runs on every training step: each call builds a new "
                    "compiled wrapper whose guards are checked (and compilation redone as "
                    "they fail) every step; compile once, before the loop",
                )
            elif _discarded(call, statement):
                yield self.diagnostic(
                    call.node,
                    "the module `torch.compile` returns is thrown away: `torch.compile` "
                    "leaves the model it is given eager, so every step still runs kernel "
                    "by kernel; bind the result (`model = torch.compile(model)`) or call "
                    "`model.compile()`, which compiles in place",
                    fix=_bind(call),
                )
            else:
                binding = module.binding_of(call.node)
                name = binding.symbol.name if binding is not None else None
                if name is not None and name.isidentifier() and names[name] <= 1:
                    yield self.diagnostic(
                        call.node,
                        f"`{name}`, the compiled module, is never used: calls of the model "
                        "it was built from run eagerly, kernel by kernel; call "
                        f"`{name}(...)` in the loop, or compile in place with "
                        "`model.compile()`",
                    )


def _discarded(call: CallSite, statement: cst.CSTNode | None) -> bool:
    """The call is a statement of its own (`torch.compile(model)`)."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and statement.body[0].value is call.node
    )


def _bind(call: CallSite) -> Fix | None:
    """`torch.compile(model)` -> `model = torch.compile(model)` (a name compiled)."""
    args = call.node.args
    if not args or args[0].keyword is not None or not isinstance(args[0].value, cst.Name):
        return None
    statement = call.ctx.statement
    assert isinstance(statement, cst.SimpleStatementLine)
    assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(args[0].value.value))], value=call.node)
    return fix(
        "Bind the compiled module to the name compiled",
        Applicability.UNSAFE,
        Replace(statement.body[0], assign),
    )
