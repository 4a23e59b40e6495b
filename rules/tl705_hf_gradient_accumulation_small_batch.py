"""TL705 hf-gradient-accumulation-small-batch: accumulating gradients over small batches.

What: `transformers.TrainingArguments(...)` (or `Seq2SeqTrainingArguments`) on a GPU run
(not `use_cpu=True`) with `gradient_accumulation_steps` above 1 and a
`per_device_train_batch_size` (the default 8, or a literal or constant the file shows)
below the `min-batch-size` option (default 32). Off by default: accumulation is usually
there because the bigger batch does not fit in memory, and whether it does depends on
the model, the sequence length and the GPU, none of which the file shows; enable it with
`--extend-select TL705`. Left alone: a trainer given these arguments trains a model of a
billion parameters or more (as its pretrained model id says, or counted from its layers;
TRL's `model="..."` id included) or a quantized one (4/8-bit), where the accumulated batch
cannot fit at once.

Why: with accumulation the GPU runs k small forward/backward passes per optimizer step;
each pays the per-step overhead, and a small batch leaves the GPU's cores idle. Where the
k-times bigger batch fits, one pass over it computes the same update faster. The
Transformers GPU-training guide: gradient accumulation saves memory, not time.

Bad:
    args = TrainingArguments("out", per_device_train_batch_size=4, gradient_accumulation_steps=8)

Good:
    args = TrainingArguments("out", per_device_train_batch_size=32)  # where it fits

Fix: none: whether the bigger batch fits is known only at run time (try
`per_device_train_batch_size=B*k, gradient_accumulation_steps=1`, or
`auto_find_batch_size=True`, and watch the memory).

Impact: always high where reported: the memory-bound cases (models of a billion
parameters or more, quantized models) are left alone, and the rule is off by default for
the rest.

Unknown device: the Trainer picks the device, so the arguments are a GPU run unless they
ask for the CPU (`use_cpu=True`, `no_cuda=True` before transformers 4.34, read through
constants and option defaults), and a setting the file cannot read (`use_cpu=not
torch.cuda.is_available()`) counts as a GPU where there is one.

Sources: Transformers docs, "GPU" (efficient training on GPUs), "Gradient accumulation"
(a memory saving, not a speed-up) and `TrainingArguments.gradient_accumulation_steps`.
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.fixes import FixSafety
from torchlint.options import MIN_BATCH_SIZE
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import Constant, TorchModule


class HfGradientAccumulationSmallBatch(Rule):
    code = "TL705"
    name = "hf-gradient-accumulation-small-batch"
    fix_safety = FixSafety.NONE
    default_enabled = False
    tokens = ("gradient_accumulation_steps",)
    options = (MIN_BATCH_SIZE,)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        minimum = self.option(module, MIN_BATCH_SIZE)
        frameworks = module.frameworks
        for args in frameworks.readable_gpu_arguments:
            given = frameworks.integer(args, "gradient_accumulation_steps", 1)
            if module.workload.trains_memory_bound(args):
                continue  # a billion parameters or quantized: memory sets the batch
            found = frameworks.batch_size(args)
            steps = given.value if isinstance(given, Constant) else given
            size = found.value if isinstance(found, Constant) else found
            if not isinstance(steps, int) or not isinstance(size, int):
                continue
            if steps <= 1 or not 0 < size < minimum:
                continue
            yield self.diagnostic(
                args.node,
                f"`gradient_accumulation_steps={steps}` over batches of {size}: {steps} small "
                "passes per optimizer step leave the GPU idle on per-step overhead; where "
                f"{size * steps} samples fit in memory, use `per_device_train_batch_size="
                f"{size * steps}` and no accumulation",
            )
