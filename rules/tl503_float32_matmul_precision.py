"""TL503 float32-matmul-precision: float32 matrix multiplications without TF32.

What: a training loop (or an ignite engine) calls a network with matrix-multiplying
layers (`Linear`, recurrent or transformer layers, attention, or a `from_pretrained`
model) that is moved to a GPU, in a file that runs in float32 (no autocast, `.half()` or
bfloat16) and never sets the matmul precision: no
`torch.set_float32_matmul_precision(...)`, no `torch.backends.cuda.matmul.allow_tf32 =
...`, no `fp32_precision = ...`. Advice, so off by default (enable it with
`--extend-select TL503`): it pays only on an Ampere or newer GPU (A100, RTX 30xx and
later; older GPUs have no TF32), a fact known at run time, and some models need full
float32 matmuls; and on code nobody here had seen, its findings were debatable
(convolutional networks the file builds through helpers or a model table, recurrent
networks, which cuDNN runs in TF32 already). Not reported with `--target-torch` below
1.12, where TF32 matmuls were on by default. Files managed by Lightning, Accelerate,
DeepSpeed or the transformers Trainer are not checked (precision is their setting).

Why: since PyTorch 1.12, float32 matrix multiplications run in full float32 precision
by default. On Ampere and newer GPUs, TF32 tensor cores multiply float32 matrices with
a 10-bit mantissa and float32 accumulation, typically several times faster;
`torch.set_float32_matmul_precision("high")` allows them (convolutions already use TF32
by default). The Performance Tuning Guide's "Enable Tensor cores" item shows this line.

Bad:
    model = nn.Transformer(d_model=512).cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda(), y.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    torch.set_float32_matmul_precision("high")
    model = nn.Transformer(d_model=512).cuda()
    for x, y in loader:
        loss = criterion(model(x.cuda(), y.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): add `torch.set_float32_matmul_precision("high")` after the imports.
Unsafe because matmul results change in the low bits (about three decimal digits of
precision in the inputs), which some models (large reductions, physics simulations)
do not tolerate.

Impact: high: on an Ampere or newer GPU TF32 tensor cores make every float32 matmul of
the step several times faster for one line (transformers, language models' vocabulary
projections). Low where the matmuls are a small part of the step: every network
convolves (convolutions use TF32 already; the Linear is a head); the networks are
counted at under a million parameters; every network is recurrent (cuDNN runs it in
TF32 already) with `Linear` layers the file shows under 1024 wide (a classifier's head,
not a vocabulary projection); or the step runs on small images (MNIST, CIFAR).

Unknown device: silent, as only networks moved to a GPU are checked; TF32 tensor cores
exist on Ampere and newer GPUs only, and a device that cannot be named may be the CPU.

Sources: PyTorch Performance Tuning Guide, "Enable Tensor cores"; PyTorch docs,
`torch.set_float32_matmul_precision`, CUDA semantics, "TensorFloat-32 (TF32) on Ampere
(and later) devices".
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.edits import spell
from torchlint.fixes import Applicability, Definition, FixSafety, fix
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import ModelSite, TorchModule, toy

RECURRENT = frozenset({"LSTM", "GRU", "RNN"})
WIDE = 1024  # a Linear this wide (a vocabulary projection) is worth TF32 beside an RNN

SET_PRECISION = "torch.set_float32_matmul_precision"
MATMUL_LAYERS = frozenset({
    "Linear", "LazyLinear", "Bilinear", "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell",
    "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer",
})  # fmt: skip


class Float32MatmulPrecision(Rule):
    code = "TL503"
    name = "float32-matmul-precision"
    fix_safety = FixSafety.UNSAFE
    default_enabled = False
    tokens = ("cuda", "accelerator")
    min_torch = (1, 12)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.workload.reduced_precision or module.sets_matmul_precision:
            return
        sites = [s for s in module.trained_on_gpu if _multiplies(module, s)]
        if not sites:
            return
        where = module.where_trained(sites)
        if where is None:
            return
        spelled, imp = spell(module, SET_PRECISION)
        low = _low(module, sites)
        message = (
            f"`{sites[0].name}` runs its float32 matmuls at full precision: on Ampere and "
            'newer GPUs `torch.set_float32_matmul_precision("high")` lets them use TF32 '
            "tensor cores, typically several times faster"
        )
        yield self.diagnostic(
            where,
            message if low is None else f"{message} (low impact: {low})",
            impact=Impact.HIGH if low is None else Impact.LOW,
            fix=fix(
                'Call `torch.set_float32_matmul_precision("high")` after the imports',
                Applicability.UNSAFE,
                imports=[imp] if imp else [],
                definitions=[Definition(SET_PRECISION, f'{spelled}("high")\n')],
            ),
        )


def _multiplies(module: TorchModule, site: ModelSite) -> bool:
    qualname = site.construction.qualname or ""
    if qualname.startswith("transformers.") and qualname.endswith(".from_pretrained"):
        return True
    return not MATMUL_LAYERS.isdisjoint(module.networks.layers(site))


def _low(module: TorchModule, sites: list[ModelSite]) -> str | None:
    """Why TF32 matmuls gain little here: every network convolves (its convolutions use
    TF32 already; the matmuls are a small head), they are counted at under a million
    parameters together, every one is recurrent (cuDNN runs it in TF32 already) with
    `Linear` layers under `WIDE`, or the step runs on small images (matmuls too small to
    keep tensor cores busy)."""
    networks = module.networks
    if all(networks.convolutional(s) for s in sites):
        return "convolutional networks, whose convolutions use TF32 already"
    if toy(networks.parameters(s) for s in sites):
        return "networks of under a million parameters: matmuls too small for tensor cores"
    if all(
        RECURRENT & networks.layers(s) and (networks.widest_linear(s) or WIDE) < WIDE for s in sites
    ):
        return "recurrent networks (cuDNN runs them in TF32 already) with small linear layers"
    if any(module.datasets.small_images(loop) for loop in module.step_loops):
        return "a step on small images (MNIST, CIFAR): matmuls too small for tensor cores"
    return None
