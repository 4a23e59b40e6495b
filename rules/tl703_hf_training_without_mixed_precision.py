"""TL703 hf-training-without-mixed-precision: the Hugging Face Trainer trains in float32.

What: `transformers.TrainingArguments(...)` (or `Seq2SeqTrainingArguments`) on a GPU run
(not `use_cpu=True`) with none of `bf16`, `fp16` and `tf32` on: each missing, or False
as a literal or a constant the file shows. Left alone: a value the file cannot read or an
option the user sets (`fp16=torch.cuda.is_available()`, `bf16=args.bf16`), a DeepSpeed
config (`deepspeed=`: precision is set there) or `half_precision_backend=`, files that
load or run the model below float32 (`from_pretrained(..., torch_dtype=torch.bfloat16)`,
`dtype="auto"`, the dtype read through a constant, an option's default or
`getattr(torch, ...)`, 4/8-bit quantization or `quantization_config=`, autocast, `.half()`,
`.bfloat16()`: the semantic layer's precision as loaded; "trains in float32" would be
wrong there, and bf16 autocast over float16 weights is not the fix) or choose the float32 matmul
precision themselves (`torch.set_float32_matmul_precision(...)`,
`torch.backends.cuda.matmul.allow_tf32 = ...`: what `tf32=` sets), arguments built from
`*args`/`**kwargs`, and TRL's configs (`SFTConfig` turns bf16 on by itself in recent
versions). On by default: on public fine-tuning scripts every finding was a transformer
trained in float32 on a GPU (docs/precision.md); the fact the file does not show, the
GPU generation, is what the fix checks at run time.

Why: in float32 the GPU's tensor cores sit idle: bf16 or fp16 mixed precision runs
matmuls 2-3x faster on Volta and newer GPUs and halves activation memory (room for a
larger batch); TF32 (`tf32=True`) speeds up float32 matmuls on Ampere and newer. The
Transformers GPU-training guide lists mixed precision as the main speed lever.

Bad:
    args = TrainingArguments("out", per_device_train_batch_size=32)

Good:
    args = TrainingArguments("out", per_device_train_batch_size=32, bf16=True)  # Ampere and newer

Fix (unsafe): set `bf16=USE_BF16`, defined once after the imports as "CUDA is available
and the GPU's compute capability is 8.0 or newer" (`torch.cuda.get_device_capability()`):
bf16 is on where the GPU has bfloat16 tensor cores (Ampere and newer), and the script runs
as before on a CPU, an older GPU (T4, V100: there `fp16=True` is the speed-up, with loss
scaling) or a machine without CUDA, where `bf16=True` would raise. Not Transformers'
`is_torch_bf16_gpu_available()`: with recent PyTorch it also says yes on a T4 or V100,
where bfloat16 has no tensor cores and is only emulated. Unsafe because numerics change
(results differ in the last bits; a few models need float32 layers).

Impact: always high: each finding is a model trained in float32 on a GPU, where mixed
precision is the largest single speed-up the Transformers guide lists; the cases where
the claim would not hold (a model loaded in half precision or quantized) are left alone.

Unknown device: the Trainer picks the device, so the arguments are a GPU run unless they
ask for the CPU (`use_cpu=True`, `no_cuda=True` before transformers 4.34, read through
constants and option defaults), and a setting the file cannot read (`use_cpu=not
torch.cuda.is_available()`) counts as a GPU where there is one. The fix's `USE_BF16` is
False without an Ampere GPU, so such a run is unchanged.

Sources: Transformers docs, "GPU" (efficient training on GPUs), "Mixed precision" (bf16,
fp16, tf32) and `TrainingArguments.bf16`/`fp16`/`tf32`; PyTorch Performance Tuning
Guide, "Use mixed precision and AMP".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import AMPERE, set_kwarg
from torchlint.fixes import Applicability, Definition, Fix, FixSafety, Import, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, CallSite, TorchModule

NAME = "USE_BF16"
DEFINITION = Definition(
    NAME,
    "# bfloat16 mixed precision where the GPU has bfloat16 tensor cores (Ampere and newer).\n"
    f"{NAME} = {AMPERE}\n",
)
# Precision set elsewhere: a DeepSpeed config, apex.
ELSEWHERE = ("deepspeed", "half_precision_backend")


class HfTrainingWithoutMixedPrecision(Rule):
    code = "TL703"
    name = "hf-training-without-mixed-precision"
    fix_safety = FixSafety.UNSAFE
    tokens = ("TrainingArguments",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        frameworks = module.frameworks
        if module.workload.reduced_precision or module.sets_matmul_precision:
            return
        for args in frameworks.readable_gpu_arguments:
            if any(args.kwarg(k) is not MISSING for k in ELSEWHERE):
                continue
            if not all(_off(module, args, flag) for flag in ("bf16", "fp16", "tf32")):
                continue
            yield self.diagnostic(
                args.node,
                "`TrainingArguments` trains in float32 (no `bf16`, `fp16` or `tf32`): on the "
                "GPU, bf16 mixed precision runs matmuls on tensor cores (often 2-3x faster) "
                "with half the activation memory; set `bf16=True` on Ampere or newer, "
                "`fp16=True` on older GPUs",
                fix=_bf16(module, args),
            )


def _off(module: TorchModule, args: CallSite, flag: str) -> bool:
    """The flag is not given, or given as False/None in a way the file shows (not an
    option a user sets on the command line)."""
    value = args.kwarg(flag)
    if value is MISSING:
        return True
    found = module.values.constant(value, args.scope)
    return found is not None and found.value in (False, None) and found.origin != "argparse"


def _bf16(module: TorchModule, args: CallSite) -> Fix | None:
    if not (module.definable(NAME) and module.imports_plainly("torch")):
        return None  # the definition writes `torch.cuda`
    return fix(
        f"Set `bf16={NAME}` (bf16 mixed precision on Ampere and newer GPUs)",
        Applicability.UNSAFE,
        Replace(args.node, set_kwarg(args.node, "bf16", cst.Name(NAME))),
        imports=[Import("torch")],
        definitions=[DEFINITION],
    )
