"""TL702 hf-dataloader-no-pin-memory: `dataloader_pin_memory=False` on a GPU run.

What: `transformers.TrainingArguments(...)` (or `Seq2SeqTrainingArguments`) with
`dataloader_pin_memory=False` (a literal, or a constant the file shows), on a GPU run
(not `use_cpu=True`). The default is True: only turning it off is reported. Left alone:
files that put their dataset on the GPU (`set_format(..., device="cuda")`,
`with_format(..., device=...)`): batches already on the GPU cannot be pinned, which is
why a script would turn pinning off. Off by default: the reason pinning was turned off is
not in the file, and on public code it mostly was one (CUDA tensors in the dataset, a
memory limit, Windows, "reduces CPU memory" in a comment: see docs/precision.md);
enable it with `--extend-select TL702`.

Why: the Trainer copies every batch to the GPU; from pageable memory the copy is staged
through a pinned buffer by the driver and cannot overlap compute, from pinned memory it
runs at full bandwidth and asynchronously. Pinning changes where a batch lives in host
memory, never its values.

Bad:
    args = TrainingArguments("out", dataloader_pin_memory=False)

Good:
    args = TrainingArguments("out")  # dataloader_pin_memory defaults to True

Fix (unsafe): set `dataloader_pin_memory=True`. Unsafe because the setting was written
on purpose: a dataset or collator that returns CUDA tensors cannot be pinned (the
DataLoader raises), and page-locked memory is a limited resource on some hosts
(containers with a small memlock limit, WSL). Read why it was turned off first.

Impact: Always high: unpinned batches are staged through a driver buffer on their way to
the GPU, at a fraction of the bandwidth and without overlapping compute, at every step.

Unknown device: the Trainer picks the device, so the arguments are a GPU run unless they
ask for the CPU (`use_cpu=True`, `no_cuda=True` before transformers 4.34, read through
constants and option defaults), and a setting the file cannot read (`use_cpu=not
torch.cuda.is_available()`) counts as a GPU where there is one.

Sources: Transformers docs, "GPU" (efficient training on GPUs), "Data preloading", and
`TrainingArguments.dataloader_pin_memory` (defaults to True); CUDA semantics notes,
"Use pinned memory buffers"; torch.utils.data docs, "Memory Pinning".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, TorchModule


class HfDataloaderNoPinMemory(Rule):
    code = "TL702"
    name = "hf-dataloader-no-pin-memory"
    fix_safety = FixSafety.UNSAFE
    default_enabled = False
    tokens = ("dataloader_pin_memory",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        frameworks = module.frameworks
        if _data_on_device(module):
            return
        for args in frameworks.readable_gpu_arguments:
            pin = args.kwarg("dataloader_pin_memory")
            found = module.values.constant(pin, args.scope) if pin is not MISSING else None
            if found is None or found.value is not False:
                continue
            literal = found.origin == "literal"
            yield self.diagnostic(
                pin,
                "`dataloader_pin_memory=False` on a GPU run: every batch is copied to the GPU "
                "from pageable memory, synchronously; leave it at its default (True)"
                + ("" if literal else " where the value is set"),
                fix=fix(
                    "Set `dataloader_pin_memory=True`",
                    Applicability.UNSAFE,
                    Replace(
                        args.node, set_kwarg(args.node, "dataloader_pin_memory", cst.Name("True"))
                    ),
                )
                if literal
                else None,
            )


def _data_on_device(module: TorchModule) -> bool:
    """`ds.set_format("torch", device="cuda")`: the dataset yields tensors on a device."""
    return any(
        c.kwarg("device") is not MISSING for c in module.method_calls("set_format", "with_format")
    )
