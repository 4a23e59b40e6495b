"""TL104 cpu-tensor-then-moved: a tensor is created on the CPU only to be copied to the GPU.

What: a torch factory (`zeros`, `ones`, `empty`, `full`, `eye`, `arange`,
`linspace`, `tensor`, `*_like`, `rand`, `randn`, `randint`, `randperm`) whose result
is immediately moved with `.cuda()` or `.to(<device>)` and nothing else (no dtype,
no `non_blocking`, no `copy`), on every training step: in a training loop that steps
the optimizer each iteration (or a loop inside one), in the `forward` of a module, or
in a function they call (two levels). Setup code that runs once, once-per-epoch code,
inference loops and tests cost a copy or two: left alone.

Why: every step, the tensor is allocated and filled by the CPU, then copied over PCIe
with a synchronising host-to-device transfer, then the CPU copy is thrown away. Passing
`device=` creates it where it is used: no copy, no CPU work, no sync. The PyTorch
Performance Tuning Guide: "Create tensors directly on the target device".

Bad:
    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), self.hidden).cuda()

Good:
    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), self.hidden, device=x.device)

Fix (sometimes safe): pass `device=` to the factory (`.cuda()` becomes
`device="cuda"`, `.cuda(1)` becomes `device="cuda:1"`). Safe for deterministic
factories whose values are exact on every device (`zeros`, `ones`, `empty`, `full`,
`eye`, `tensor`, the non-random `*_like`, `arange` of int literals). Unsafe for the
random ones (`rand`, `randn`, `randint`, `randperm`, `rand*_like`): the CPU and CUDA
generators give different numbers and draw from different seeds' streams; and for
`linspace` and non-integer `arange`, whose values are computed on the device and may
differ in the last bit. Calls that also pass `requires_grad=`, `out=`,
`pin_memory=`, a `device=` of their own or `**kwargs` are left alone (with
`requires_grad=True` the moved tensor is not a leaf: changing that changes `.grad`).

Sources: PyTorch Performance Tuning Guide, "Create tensors directly on the target
device"; CUDA semantics notes; torch.Generator docs (per-device generators).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import CallSite, TorchModule
from torchlint.semantic.syntax import int_value

DETERMINISTIC = {
    "zeros",
    "ones",
    "empty",
    "full",
    "eye",
    "tensor",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
}
RANDOM = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like"}
INEXACT = {"linspace", "arange"}  # `arange` of int literals is exact: see `_safe`
FACTORIES = DETERMINISTIC | RANDOM | INEXACT
BLOCKING_KWARGS = ("device", "requires_grad", "out", "pin_memory")


def _safe(name: str, factory: cst.Call) -> bool:
    if name in DETERMINISTIC:
        return True
    if name == "arange":  # integer literals only: exact on every device
        return all(
            int_value(a.value) is not None if a.keyword is None else a.keyword.value == "dtype"
            for a in factory.args
        )
    return False


class CpuTensorThenMoved(Rule):
    code = "TL104"
    name = "cpu-tensor-then-moved"
    fix_safety = FixSafety.SOMETIMES
    tokens = ("cuda", ".to(")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        for move in module.method_calls("cuda", "to"):
            factory = move.receiver
            if not isinstance(factory, cst.Call):
                continue
            qualname = module.resolve(factory.func, move.scope) or ""
            head, _, name = qualname.rpartition(".")
            if head != "torch" or name not in FACTORIES:
                continue
            if any(a.star == "**" for a in factory.args) or any(
                a.keyword is not None and a.keyword.value in BLOCKING_KWARGS for a in factory.args
            ):
                continue
            device = self._device(module, move)
            if device is None or not module.per_step(move.ctx):
                continue
            safe = _safe(name, factory)
            spelled = module.module.code_for_node(factory.func)
            yield self.diagnostic(
                move.node,
                f"`{spelled}(...)` builds the tensor on the CPU and then copies it to the GPU; "
                "create it there with `device=`",
                fix=fix(
                    "Pass `device=` to the factory",
                    Applicability.SAFE if safe else Applicability.UNSAFE,
                    Replace(move.node, set_kwarg(factory, "device", device)),
                ),
            )

    @staticmethod
    def _device(module: TorchModule, move: CallSite) -> cst.BaseExpression | None:
        """The device expression for `device=`, when the move passes only a device."""
        args = move.node.args
        if move.method == "cuda":
            if not args:
                return cst.SimpleString('"cuda"')
            if len(args) == 1 and args[0].keyword is None:
                index = int_value(args[0].value)
                return (
                    cst.SimpleString(f'"cuda:{index}"')
                    if index is not None and index >= 0
                    else None
                )
            return None
        if len(args) != 1 or args[0].star:
            return None
        arg = args[0]
        if arg.keyword is not None and arg.keyword.value != "device":
            return None
        found = module.move(move)
        if found is None or found.is_cpu:
            return None
        return arg.value
