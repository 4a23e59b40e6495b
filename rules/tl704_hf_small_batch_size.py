"""TL704 hf-small-batch-size: the Hugging Face Trainer trains on small per-device batches.

What: `transformers.TrainingArguments(...)` (or `Seq2SeqTrainingArguments`) on a GPU run
(not `use_cpu=True`) whose `per_device_train_batch_size` is left at its default, 8, or
set below the `min-batch-size` option (default 32; a literal, or a constant the file
shows), without gradient accumulation (that case is TL705). Off by default: whether a
bigger batch fits in the GPU's memory depends on the model, the sequence length and the
GPU, none of which the file shows (8 is right for a 7B-parameter model on one GPU, small
for BERT-base); enable it with `--extend-select TL704`. Left alone: a trainer given these
arguments trains a model of a billion parameters or more (as its pretrained model id
says, "Llama-3.1-8B", a "llama"/"mistral" family, or counted from its layers; TRL's
`model="..."` id included) or a quantized one (4/8-bit): there the small batch is the
memory budget.

Why: each optimizer step has a fixed cost (kernel launches, the optimizer update, the
Trainer's bookkeeping); with a few samples per step that cost dominates and the GPU's
cores are mostly idle. The Transformers GPU-training guide puts the batch size first
among the settings that speed training up.

Bad:
    args = TrainingArguments("out", num_train_epochs=3)  # 8 samples per step

Good:
    args = TrainingArguments(
        "out", num_train_epochs=3, per_device_train_batch_size=32, auto_find_batch_size=True
    )

Fix (unsafe): set `per_device_train_batch_size` to `min-batch-size` (where the value is
written: in the call, or the constant or option it comes from) and, in the call,
`auto_find_batch_size=True`: the Trainer halves the batch and retries when it runs out of
memory, so the script still runs where the bigger batch does not fit. Unsafe because the
batch size changes the optimization (rescale the learning rate with it) and the number of
steps per epoch. Not offered with DeepSpeed (`deepspeed=`), which
`auto_find_batch_size` does not support.

Impact: always high where reported: the cases whose batch is a memory budget (models of
a billion parameters or more, quantized models) are left alone, and the rule is off by
default for the rest.

Unknown device: the Trainer picks the device, so the arguments are a GPU run unless they
ask for the CPU (`use_cpu=True`, `no_cuda=True` before transformers 4.34, read through
constants and option defaults), and a setting the file cannot read (`use_cpu=not
torch.cuda.is_available()`) counts as a GPU where there is one.

Sources: Transformers docs, "GPU" (efficient training on GPUs), "Batch size", and
`TrainingArguments.per_device_train_batch_size` (defaults to 8) and
`auto_find_batch_size`.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, Fix, FixSafety, Replace, fix
from torchlint.options import MIN_BATCH_SIZE
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, CallSite, Constant, TorchModule


class HfSmallBatchSize(Rule):
    code = "TL704"
    name = "hf-small-batch-size"
    fix_safety = FixSafety.UNSAFE
    default_enabled = False
    tokens = ("TrainingArguments",)
    options = (MIN_BATCH_SIZE,)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        minimum = self.option(module, MIN_BATCH_SIZE)
        frameworks = module.frameworks
        for args in frameworks.readable_gpu_arguments:
            if frameworks.integer(args, "gradient_accumulation_steps", 1) != 1:
                continue  # TL705
            if module.workload.trains_memory_bound(args):
                continue  # a billion parameters or quantized: memory sets the batch
            found = frameworks.batch_size(args)
            if found is None:
                continue
            size = found.value if isinstance(found, Constant) else found
            if not isinstance(size, int) or not 0 < size < minimum:
                continue
            what = (
                f"`per_device_train_batch_size={size}`"
                if isinstance(found, Constant)
                else "`per_device_train_batch_size` left at its default, 8,"
            )
            yield self.diagnostic(
                args.node,
                f"{what} trains on {size} samples per step: per-step overhead leaves the GPU "
                f"idle where a bigger batch fits; try {minimum} with "
                "`auto_find_batch_size=True` and rescale the learning rate",
                fix=_fix(args, found, minimum),
            )


def _fix(args: CallSite, found: Constant | int, minimum: int) -> Fix | None:
    if args.kwarg("deepspeed") is not MISSING:
        return None
    title = f"Set `per_device_train_batch_size={minimum}`"
    if isinstance(found, Constant) and found.origin != "literal":
        return fix(title, Applicability.UNSAFE, Replace(found.node, cst.Integer(str(minimum))))
    call = set_kwarg(args.node, "per_device_train_batch_size", cst.Integer(str(minimum)))
    call = set_kwarg(call, "auto_find_batch_size", cst.Name("True"))
    return fix(
        f"{title} and `auto_find_batch_size=True`", Applicability.UNSAFE, Replace(args.node, call)
    )
