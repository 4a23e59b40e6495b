"""TL707 adapter-base-in-fp32: the frozen base of an adapter-wrapped model is stored in float32.

What: a pretrained network loaded with `from_pretrained(...)` (a transformers model class,
a diffusers model such as `UNet2DConditionModel`, or PEFT's `AutoPeftModelForCausalLM`,
which loads a base and its adapter at once) with no `torch_dtype=`/`dtype=` (or None:
float32, the default of diffusers and of transformers before 5.0), or with float32
spelled out (`torch.float32`, `"float32"`), then wrapped for adapter
training or inference: given to PEFT's `get_peft_model`, `prepare_model_for_kbit_training`,
`PeftModel.from_pretrained` or `inject_adapter_in_model`, to a TRL trainer with
`peft_config=`, or given an adapter with `model.add_adapter(...)`/`model.load_adapter(...)`
(through names, `.to()` chains, helpers that return it). Reported at the `from_pretrained`
call, in a file that uses a GPU and puts this model there: `device_map=` (not "cpu"), a
move to a GPU, a Hugging Face trainer or `accelerator.prepare` given it, or a training loop
of the file calling it. Left alone: a reduced dtype loaded (`torch.bfloat16`,
`torch.float16`, `"auto"`) or one the file cannot read (`torch_dtype=dtype`, `**kwargs`),
quantized loads (`load_in_8bit=True`, `load_in_4bit=True`, `quantization_config=`), which
store the base small already, a cast of the model (`.half()`, `.bfloat16()`,
`.to(dtype=...)`, `.to(device, weight_dtype)`), `torch.set_default_dtype(...)`, full
fine-tuning with no adapter (every weight is trained: float32 master weights are another
matter), a model kept on the CPU (`device_map="cpu"`, no move to a GPU) and files that
never use a GPU. Mixed precision does not silence it: autocast and the Trainer's
`bf16=True`/`fp16=True` compute in half precision but keep the stored weights in float32
(and cast them again on every forward).

Why: the base weights are frozen, so float32 buys them nothing; stored in float32 they
take twice the GPU memory of bfloat16/float16 (a 7B model: 28 GB instead of 14 GB: the
difference between fitting a batch or a sequence length and not) and every forward reads
twice the bytes (under autocast it also casts each weight to half precision, every step).
Adapters and LoRA matrices stay in float32 either way (PEFT keeps trainable adapter
weights in float32 by default), which is where precision matters.

Bad:
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", device_map="auto")
    model = get_peft_model(model, LoraConfig(r=16, task_type="CAUSAL_LM"))

Good:
    model = AutoModelForCausalLM.from_pretrained(
        "meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16, device_map="auto"
    )
    model = get_peft_model(model, LoraConfig(r=16, task_type="CAUSAL_LM"))

Fix (unsafe): add `torch_dtype=torch.bfloat16 if USE_BF16 else None`, with `USE_BF16`
defined once after the imports as "CUDA is available and the GPU's compute capability is
8.0 or newer" (the definition TL703 shares): bfloat16 where the GPU has bfloat16 tensor
cores; elsewhere (a CPU, a T4 or V100, where bfloat16 is only emulated) None, the
library's own default as before (float32 before transformers 5, the checkpoint's dtype
from 5 on, which reads None as "auto"). On older GPUs `torch.float16` is the choice, which
the fix does not make
(float16 weights under a Trainer's `fp16=True` raise "Attempting to unscale FP16
gradients" with PEFT versions that give adapters the base's dtype). Unsafe because the
frozen forward's numerics change (bfloat16 keeps 8 bits of mantissa), adapters that
older PEFT versions build in the base's dtype train in bfloat16, and a merged model
(`merge_and_unload()`) is saved in bfloat16. Offered only where `torch_dtype` is missing
(a float32 the user wrote is a decision), for text models (`*ForCausalLM`, `*LMHeadModel`,
`*ForMaskedLM`, `AutoModelForSeq2SeqLM`, `AutoModelFor{Sequence,Token}Classification`,
`AutoModelForQuestionAnswering`: their inputs are token ids; a vision, audio or diffusion
model fed float32 tensors would raise a dtype mismatch outside autocast), and not where
`prepare_model_for_kbit_training` wraps the model: on a model that is not quantized it
casts float16/bfloat16 weights back to float32, so the message says to quantize the base
(QLoRA) or to load it in bfloat16 and call `model.enable_input_require_grads()` instead.
`torch_dtype=`, not `dtype=`: every transformers version with PEFT support reads it
(4.56+ also accepts `dtype=`).

Impact: high. Low where the model id says it is small: under a billion parameters ("opt-
125m", "Qwen2.5-0.5B") or a small or base size ("bert-base-uncased", "t5-small", "gpt2"):
its float32 weights take a few gigabytes at most, and activations dominate the memory.

Transformers 5.0 loads the checkpoint's own dtype by default (`dtype="auto"`): there a
load with no dtype is not float32 (bfloat16 for most large models), and the finding does
not hold; the rule cannot read which transformers a project uses and assumes 4.x.

Unknown device: the rule needs the model on a GPU (where the cost is GPU memory and
bandwidth); a move to a device it cannot name (`model.to(args.device)`) counts only in a
file that uses a GPU elsewhere, and a model with no move, no `device_map` and no trainer
stays on the CPU, where from_pretrained puts it, and is left alone.

Off by default: since transformers 5.0, `from_pretrained` without a dtype loads the
checkpoint's own dtype (bfloat16 for most recent models), so the no-dtype case holds only
for projects on transformers 4 and for diffusers; the rule cannot yet read which version
a project uses. Select it (`extend-select = ["TL707"]`) on a transformers 4 project. Its
shapes are not in the corpus: its precision is unmeasured.

Sources: Transformers docs, "Loading models" (model data type, `torch_dtype`) and "PEFT"
integration (`add_adapter`, `load_adapter`); transformers pull request 42805 ("auto" by
default from 5.0); PEFT docs, "LoRA" and `prepare_model_for_kbit_training`; the LoRA and
QLoRA papers (frozen base weights).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from torchlint.edits import AMPERE, set_kwarg
from torchlint.fixes import Applicability, Definition, Fix, FixSafety, Import, Replace, fix
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    BILLION,
    MISSING,
    CallSite,
    Model,
    ModelSite,
    Scope,
    TorchModule,
    argument,
    bool_value,
    dotted_name,
    hf_trainer,
    is_none,
    millions,
    str_value,
)

NAME = "USE_BF16"
DEFINITION = Definition(
    NAME,
    f"# bfloat16 where the GPU has bfloat16 tensor cores (Ampere and newer).\n{NAME} = {AMPERE}\n",
)
DTYPE = f"torch.bfloat16 if {NAME} else None"  # None: the library's default
# What loads a pretrained network with its weights (not `from_config`: random weights).
LOADS = re.compile(r"(?:transformers|diffusers|peft)\.(?:\w+\.)*from_pretrained$")
PEFT_LOADER = re.compile(r"peft\.(?:\w+\.)*AutoPeftModel\w*\.from_pretrained$")
# PEFT's functions that wrap the model they are given first.
WRAPS = {
    "peft.get_peft_model": "get_peft_model",
    "peft.prepare_model_for_kbit_training": "prepare_model_for_kbit_training",
    "peft.PeftModel.from_pretrained": "PeftModel.from_pretrained",
    "peft.PeftModelForCausalLM.from_pretrained": "PeftModelForCausalLM.from_pretrained",
}
KBIT = "peft.prepare_model_for_kbit_training"
INJECT = "peft.inject_adapter_in_model"  # (peft_config, model)
ADAPTER_METHODS = ("add_adapter", "load_adapter")
# Models whose inputs are token ids: loaded in bfloat16 they take the same inputs.
TEXT_MODELS = re.compile(
    r"transformers\.(?:\w+\.)*(?:\w+(?:ForCausalLM|LMHeadModel|ForMaskedLM)|AutoModelFor"
    r"(?:Seq2SeqLM|SequenceClassification|TokenClassification|QuestionAnswering))"
    r"\.from_pretrained$"
)
FLOAT32 = ("torch.float32", "torch.float")
DEFAULT = "no `torch_dtype`"
FLOAT32_NAMES = ("float32", "float", "torch.float32", "torch.float")
# A model id that says a small size ("bert-base-uncased", "t5-small", "gpt2-medium").
SMALL_NAME = re.compile(
    r"(?:^|[-_/])(?:tiny|mini|small|base)(?:$|[-_])|(?:^|/)(?:gpt2(?:-medium|-large)?|distil\w*)$",
    re.IGNORECASE,
)


@dataclass
class Wrap:
    """How an adapter wraps a model: the call, as the message names it."""

    call: CallSite
    name: str


class AdapterBaseInFp32(Rule):
    code = "TL707"
    name = "adapter-base-in-fp32"
    fix_safety = FixSafety.UNSAFE
    default_enabled = False  # transformers 5 changed the default dtype: see the doc
    tokens = ("peft", "PeftModel", "add_adapter", "load_adapter", "peft_config")
    pattern = re.compile(r"from_pretrained")  # the load the finding is reported at

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.calls_to("torch.set_default_dtype"):
            return
        wraps = _wraps(module)
        for site in module.models.sites:
            call = site.construction
            if not LOADS.match(call.qualname or "") or not site.is_network:
                continue
            found = wraps.get(id(site), [])
            if not found and PEFT_LOADER.match(call.qualname or ""):
                found = [Wrap(call, "")]  # base and adapter loaded together
            stored = _float32(module, site)
            if not found or stored is None or _cast(module, site):
                continue
            if not _on_gpu(module, site):
                continue
            kbit = [w for w in found if w.call.qualname == KBIT]
            yield self._report(module, site, (kbit or found)[0], stored, bool(kbit))

    def _report(
        self, module: TorchModule, site: ModelSite, wrap: Wrap, stored: str, kbit: bool
    ) -> Diagnostic:
        small = _small(module, site)
        call = site.construction
        if stored == DEFAULT and not (call.qualname or "").startswith("diffusers."):
            stored += ": the default before transformers 5"
        what = f"`{_callee(call)}` loads the base weights in float32 ({stored})"
        if kbit:
            advice = (
                f"and {wrap.name} keeps them there (on a model that is not quantized it "
                "casts float16/bfloat16 weights back to float32) while they stay frozen: "
                "twice the GPU memory and memory traffic of bfloat16 for weights never "
                "updated; quantize the base (`quantization_config=BitsAndBytesConfig(...)`"
                ", QLoRA), or load it with `torch_dtype=torch.bfloat16` and call "
                "`model.enable_input_require_grads()` instead"
            )
        else:
            frozen = f"and {wrap.name} freezes them" if wrap.name else "and freezes them"
            advice = (
                f"{frozen} under an adapter: twice the GPU memory and "
                "memory traffic of bfloat16/float16, every step, for weights never "
                "updated"
                + (
                    " (mixed precision computes in half precision but keeps them stored in float32)"
                    if _mixed_precision(module)
                    else ""
                )
                + "; load with `torch_dtype=torch.bfloat16` (Ampere or newer; "
                "`torch.float16` on older GPUs)"
            )
        return self.diagnostic(
            call.node,
            f"{what} {advice}" + (f" (low impact: {small})" if small else ""),
            fix=None if kbit or not stored.startswith(DEFAULT) else _fix(module, site),
            impact=Impact.LOW if small else Impact.HIGH,
        )


def _mixed_precision(module: TorchModule) -> bool:
    """The file computes in half precision: autocast, a GradScaler, the Trainer's
    `bf16`/`fp16` (given, and not False)."""
    if module.workload.reduced_precision:
        return True
    return any(
        (value := args.kwarg(flag)) is not MISSING and bool_value(value) is not False
        for args in module.frameworks.training_arguments
        for flag in ("bf16", "fp16")
    )


def _callee(call: CallSite) -> str:
    """`AutoModelForCausalLM.from_pretrained` as the file writes it."""
    return dotted_name(call.node.func) or call.qualname or "from_pretrained"


def _wraps(module: TorchModule) -> dict[int, list[Wrap]]:
    """id(model) -> how adapters wrap it: a PEFT function given it, a TRL trainer given
    it with `peft_config=`, `model.add_adapter(...)`/`load_adapter(...)`."""
    found: dict[int, list[Wrap]] = {}
    for call in module.calls:
        qualname = call.qualname or ""
        target: cst.BaseExpression | None = None
        if qualname in WRAPS:
            target = argument(call.node, "model", ("model",))
            name = f"`{WRAPS[qualname]}`"
        elif qualname == INJECT:
            target = argument(call.node, "model", ("peft_config", "model"))
            name = "`inject_adapter_in_model`"
        elif call.method in ADAPTER_METHODS:
            target = call.receiver
            name = f"`.{call.method}(...)`"
        elif hf_trainer(call.qualname) and not _none(call.kwarg("peft_config")):
            target = argument(call.node, "model", ("model",))
            name = f"`{_callee(call)}(peft_config=...)`"
        if target is None or target is MISSING:
            continue
        site = module.models.of(target, call.scope)
        if isinstance(site, ModelSite):
            found.setdefault(id(site), []).append(Wrap(call, name))
    return found


def _none(value: cst.BaseExpression) -> bool:
    return value is MISSING or is_none(value)


def _float32(module: TorchModule, site: ModelSite) -> str | None:
    """How the load keeps float32 (`DEFAULT`: no dtype, or None; or the float32 it
    spells out); None for a reduced, quantized or unreadable precision."""
    call = site.construction
    if call.has_star_args or module.networks.loaded_precision(site) is not None:
        return None
    for name in ("torch_dtype", "dtype"):
        value = call.kwarg(name)
        if value is not MISSING and not is_none(value):
            written = module.module.code_for_node(value)
            return f"`{name}={written}`" if _is_float32(module, value, call.scope) else None
    return DEFAULT


def _is_float32(module: TorchModule, node: cst.BaseExpression, scope: Scope) -> bool:
    """Every value the expression may hold is float32."""
    origins = module.values.origins(node, scope)
    for value, where in origins:
        if where.resolve(value) in FLOAT32:
            continue
        constant = module.values.constant(value, where)
        if constant is None or constant.value not in FLOAT32_NAMES:
            return False
    return bool(origins)


def _cast(module: TorchModule, site: Model) -> bool:
    """The file casts the model below float32 or to a dtype it cannot read: `.half()`,
    `.bfloat16()`, `.to(dtype=...)`, `.to(torch.bfloat16)`, `.to(device, weight_dtype)`."""
    for call in module.models.method_calls_on(site):
        if call.method in ("half", "bfloat16"):
            return True
        if call.method not in ("to", "type"):
            continue
        dtype = call.kwarg("dtype")
        if dtype is not MISSING and not _is_float32(module, dtype, call.scope):
            return True
        for i, value in enumerate(call.positional):
            if i == 1 and not _is_float32(module, value, call.scope):
                return True  # `.to(device, dtype)`
            if module.networks.dtype(value, call.scope) not in (None, "auto"):
                return True
            if "dtype" in (dotted_name(value) or "").lower():
                return True  # `.to(weight_dtype)`
    return False


def _on_gpu(module: TorchModule, site: ModelSite) -> bool:
    """The model is put on a GPU: `device_map=` other than the CPU (Accelerate places it
    on the GPUs there are), or, in a file that uses a GPU, a move there, a trainer or
    `accelerator.prepare` given it, or a training loop of the file calls it."""
    call = site.construction
    device_map = call.kwarg("device_map")
    if device_map is not MISSING:
        return not _cpu_map(module, device_map, call.scope)
    if not module.placement.uses_gpu:
        return False
    if module.on_gpu(site) or module.trained(site):
        return True
    frameworks = module.frameworks
    for trainer in frameworks.hf_trainers:
        given = argument(trainer.node, "model", ("model",))
        if given is not MISSING and module.models.of(given, trainer.scope) is site:
            return not frameworks.cpu_only
    return module.placement.managed and any(
        module.models.of(a.value, c.scope) is site
        for c in module.method_calls("prepare")
        for a in c.node.args
    )


def _cpu_map(module: TorchModule, node: cst.BaseExpression, scope: Scope) -> bool:
    """`device_map="cpu"` or `{"": "cpu"}`, through names."""
    for value, where in module.values.origins(node, scope):
        if isinstance(value, cst.Dict):
            values = [e.value for e in value.elements if isinstance(e, cst.DictElement)]
            if not values or any(str_value(v) != "cpu" for v in values):
                return False
            continue
        constant = module.values.constant(value, where)
        if constant is None or constant.value != "cpu":
            return False
    return True


def _small(module: TorchModule, site: ModelSite) -> str | None:
    """Why the model is small enough for the gain to be negligible, if its id says so."""
    size = module.networks.estimated_parameters(site)
    name = module.networks.pretrained_id(site)
    if size is not None:
        if size >= BILLION:
            return None
        gigabytes = size * 4 / 1e9
        return (
            f"a model of about {millions(size)} parameters: its float32 weights take "
            f"{gigabytes:.1f} GB, and activations dominate the memory"
        )
    if name is not None and SMALL_NAME.search(name):
        return f'"{name}" is a small model: its weights take little of the GPU\'s memory'
    return None


def _fix(module: TorchModule, site: ModelSite) -> Fix | None:
    call = site.construction
    if not TEXT_MODELS.match(call.qualname or ""):
        return None  # float32 inputs (pixels, audio, latents) would meet bfloat16 weights
    if not (module.definable(NAME) and module.imports_plainly("torch")):
        return None  # the definition and the dtype write `torch.`
    return fix(
        f"Load the base in bfloat16 where the GPU has bfloat16 tensor cores (`torch_dtype="
        f"{DTYPE}`)",
        Applicability.UNSAFE,
        Replace(call.node, set_kwarg(call.node, "torch_dtype", cst.parse_expression(DTYPE))),
        imports=[Import("torch")],
        definitions=[DEFINITION],
    )
