"""TL409 cuda-launch-blocking: every CUDA kernel launch made synchronous.

What: a training script that sets the environment variable `CUDA_LAUNCH_BLOCKING` to
`"1"`: `os.environ["CUDA_LAUNCH_BLOCKING"] = "1"`, `os.environ.setdefault(...)`,
`os.environ.update({...})` or `os.putenv(...)`, unconditionally, in a file that puts
work on a GPU and trains. Setting it under a condition (`if args.debug:`) is left alone.

Why: `CUDA_LAUNCH_BLOCKING=1` is a debugging switch: each kernel launch waits until the
kernel has finished, so that an error is reported at the Python line that caused it.
The CPU can then never run ahead of the GPU: every launch's latency is paid in
series, and the GPU idles while Python prepares the next kernel (the CUDA semantics
notes describe asynchronous execution, and this variable as the way to turn it off
for debugging). Left in a training script after a debugging session, it slows every
step.

Bad:
    import os

    os.environ["CUDA_LAUNCH_BLOCKING"] = "1"  # from chasing a device-side assert
    model = Net().cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    # run `CUDA_LAUNCH_BLOCKING=1 python train.py` when debugging, not set in the script
    model = Net().cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): remove the statement. Unsafe because it can uncover a race the blocking
launches hid (a host buffer reused right after a `non_blocking=True` copy from it), and
a CUDA error is then reported at a later line.

Impact: Always high: every kernel launch waits for the kernel to finish, so the CPU
never runs ahead and the GPU idles between kernels at every step.

Unknown device: silent, as the rule reports only in files that use a GPU (see TL201);
the variable slows CUDA launches only, and with a device that cannot be named it may do
nothing.

Sources: PyTorch docs, CUDA semantics, "Asynchronous execution"; NVIDIA CUDA
Programming Guide, "CUDA Environment Variables" (`CUDA_LAUNCH_BLOCKING`).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, Remove, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import Context, TorchModule, str_value

VARIABLE = "CUDA_LAUNCH_BLOCKING"
ENVIRON = "os.environ"


class CudaLaunchBlocking(Rule):
    code = "TL409"
    name = "cuda-launch-blocking"
    fix_safety = FixSafety.UNSAFE
    tokens = (VARIABLE,)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not (module.training_loops or module.placement.managed) or not module.placement.uses_gpu:
            return
        for node, value, ctx, alone in _settings(module):
            if str_value(value) != "1" or module.runs.conditional(ctx, node):
                continue
            statement = ctx.statement
            lone = (
                alone
                and isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
                and isinstance(statement.body[0], (cst.Assign, cst.Expr))
            )
            yield self.diagnostic(
                node,
                "`CUDA_LAUNCH_BLOCKING=1` makes every kernel launch wait for the kernel to "
                "finish, so the CPU never runs ahead of the GPU: it is for debugging, remove it",
                fix=fix("Remove the setting", Applicability.UNSAFE, Remove(statement))
                if lone and isinstance(statement, cst.SimpleStatementLine)
                else None,
            )


def _settings(
    module: TorchModule,
) -> Iterator[tuple[cst.CSTNode, cst.BaseExpression, Context, bool]]:
    """(node to report, value, where, whether the statement sets nothing else) for each
    place the file sets the variable."""
    for target, value, ctx in module.item_stores:
        if value is None or module.resolve(target.value, ctx.scope) != ENVIRON:
            continue
        if len(target.slice) == 1 and _names_variable(target.slice[0].slice):
            yield target, value, ctx, True
    for call in module.calls:
        args = call.positional
        if call.qualname == "os.putenv" or (
            call.method == "setdefault"
            and call.receiver is not None
            and module.resolve(call.receiver, call.scope) == ENVIRON
        ):
            if len(args) == 2 and str_value(args[0]) == VARIABLE:
                yield call.node, args[1], call.ctx, True
        elif (
            call.method == "update"
            and call.receiver is not None
            and module.resolve(call.receiver, call.scope) == ENVIRON
            and len(args) == 1
            and isinstance(args[0], cst.Dict)
        ):
            elements = args[0].elements
            for element in elements:
                if isinstance(element, cst.DictElement) and str_value(element.key) == VARIABLE:
                    yield call.node, element.value, call.ctx, len(elements) == 1


def _names_variable(index: cst.BaseSlice) -> bool:
    return isinstance(index, cst.Index) and str_value(index.value) == VARIABLE
