"""TL001 small-batch-size: a training DataLoader uses a batch size too small to fill the GPU.

What: a `torch.utils.data.DataLoader` whose batches feed a training loop of the file
(a backward pass and an optimizer step per batch) or a framework's training
(`trainer.fit(model, loader)`), and whose `batch_size` is a constant from 2 to below the
`min-batch-size` option (default 32), or below `tiny-network-batch-size` (default 64)
where every network it trains has under 1M parameters counted from its layers (a
logistic regression, a small MLP or CNN: launch overhead bounds each step up to large
batches): an int literal (or arithmetic of them), a name bound once to one, an argparse
option's default (`args.batch_size`), a config entry (`config["batch_size"]`,
`cfg.batch_size` of a dict or namespace), or a parameter's default or the one value
every call of the file passes; across files, a constant another file of the project
defines (`from config import BATCH_SIZE`) or the one value the other files pass for a
parameter (`make_loaders(batch_size=8)` in train.py, the loader built in data.py): the
finding says the value is set in another file, and offers no fix (it would edit that
file). A value a user can change
(the option, config and parameter defaults) is reported only where every network the
loader trains is small enough to read (under 10M parameters counted from its layers):
elsewhere a small default is usually a memory budget (high-resolution GANs, style
transfer) the paper chose. A batch size of 1 is a choice
left alone: per-sample training, variable-size inputs, and the image-to-image GAN papers
(pix2pix, CycleGAN) train with batch 1 and instance normalisation on purpose. Also left
alone: files that never use a GPU (no GPU device, `.cuda()` or `torch.cuda` call: on the
CPU a bigger batch buys no GPU utilisation), and networks whose memory sets the batch:
a billion parameters or more (counted from their layers, or as a pretrained model id
says: "Llama-2-7b", "opt-1.3b", a family released only that large such as "llama" or
"mistral"), loaded quantized (`load_in_8bit/4bit=True`, `quantization_config=`), or
built without allocating (the meta device, `init_empty_weights`, Fabric's
`init_module(empty_init=True)`) or sharded across GPUs (FSDP, DeepSpeed, tensor
parallelism) in the file: what is done for models too large for one GPU.
A call of a loader factory the project names (`loader-factories` with `batch-size` in
`[tool.torchlint.semantic]`, see docs/extending.md) counts as a DataLoader with the batch
size it passes for that parameter; one that passes none has the factory's own default,
which cannot be read: silent.
A loader that only a Lightning Trainer on the CPU, or one that runs a handful of
batches (`fast_dev_run`, `limit_train_batches` of at most 10: a test or a
bug-report template; `max_steps` of at most 100: a demo or a benchmark), trains on is
left alone.

Why: every step launches the same kernels whatever the batch size; with a handful
of samples per step the GPU spends its time on launch overhead and Python, not on
arithmetic, and throughput per sample collapses. Larger batches (within memory)
are the first lever of the PyTorch Performance Tuning Guide and of Lightning's
`BatchSizeFinder`. A command-line or config default is what the script runs with
unless told otherwise: the finding names where the value comes from.

Bad:
    BATCH_SIZE = 8
    loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    model = nn.Linear(8, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Good:
    BATCH_SIZE = 64  # and the learning rate scaled with it
    loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    model = nn.Linear(8, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = criterion(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): raise the literal (the constant's value, the option's default, the config
entry: where it is written) to `min-batch-size` (`tiny-network-batch-size` for the
networks under 1M parameters). Unsafe because it changes the
optimisation: fewer steps per epoch, a different gradient noise scale and a different
memory footprint. Scale the learning rate with the batch size (linear scaling rule,
Goyal et al. 2017) and check convergence; `torchlint verify --tune-batch-size` measures
the largest batch that fits on your GPU.

Impact: low where the loader trains a Hugging Face pretrained transformer
(`from_pretrained`), whatever its size (DistilBERT's 66M at 512 tokens a sample is
already compute-bound at 16), or where the file loads one, which the networks it trains
hold or wrap (a LightningModule, a classifier head over `DistilBertModel`): fine-tuning examples
choose the batch that fits beside the weights and activations on a common GPU, so
raising it often runs out of memory and the gain, where it fits, is modest. High
otherwise.

Unknown device: the file must use a GPU where there is one (a device that is a GPU on
some branch, `.cuda()`, `torch.cuda` calls, a managed framework) or train on a device its
function receives (`def train(model, loader, device)`); a device that cannot be named
elsewhere (`args.device` without a GPU default) is not enough: silent.

Sources: PyTorch Performance Tuning Guide; Lightning `BatchSizeFinder`; Goyal et
al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour" (2017).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.options import MIN_BATCH_SIZE, TINY_NETWORK_BATCH_SIZE
from torchlint.results import Impact
from torchlint.rule import NO_GPU, NOT_TRAINED, Diagnostic, Rule
from torchlint.semantic import MISSING, DataLoaderSite, TorchModule, fine_tuned, trained_on

SMALL_NETWORK = 10_000_000  # parameters
TINY_NETWORK = 1_000_000  # parameters: a step of it is launch overhead up to large batches
LOW_REASON = "a pretrained transformer fine-tuned: the batch is its memory budget"
ORIGINS = {
    "argparse": "the command-line default",
    "config": "the config value",
    "default": "the parameter default",
    "argument": "the value passed for",
}


class SmallBatchSize(Rule):
    code = "TL001"
    name = "small-batch-size"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader", "auto_dataloader")  # ignite's factory too
    options = (MIN_BATCH_SIZE, TINY_NETWORK_BATCH_SIZE)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        least = self.option(module, MIN_BATCH_SIZE)
        tiny = max(least, self.option(module, TINY_NETWORK_BATCH_SIZE))
        if not (module.placement.uses_gpu or module.placement.presumed_accelerator):
            self.pass_over(None, NO_GPU)
            return  # on the CPU a bigger batch buys no GPU utilisation
        for loader in [*module.loaders.sites, *module.loaders.made]:
            node = loader.call.node
            if (
                not loader.argument_known("batch_size")
                or loader.arg("batch_sampler") is not MISSING
            ):
                self.pass_over(node, "a `**` dict or a batch sampler sets the batch size")
                continue
            value = loader.arg("batch_size")
            if value is MISSING:
                continue  # TL002's case
            found = module.values.constant(value, loader.call.scope)
            if found is None:
                self.pass_over(node, "the batch size is not a constant it can read")
                continue
            size = found.value
            if not isinstance(size, int) or isinstance(size, bool) or not 1 < size < tiny:
                self.pass_over(node, f"a batch size of {size} is not small")
                continue
            if not loader.trains or module.frameworks.idle_loader(loader):
                self.pass_over(node, NOT_TRAINED)
                continue
            sizes = _sizes(module, loader)
            minimum = tiny if sizes and all(n < TINY_NETWORK for n in sizes) else least
            if size >= minimum:
                self.pass_over(node, f"a batch size of {size} is at least {minimum}")
                continue
            if found.origin in ORIGINS and not (sizes and all(n < SMALL_NETWORK for n in sizes)):
                self.pass_over(node, "a default a user can change, for networks it cannot size")
                continue
            trained = trained_on(module, loader)
            if module.workload.shards_models or any(
                module.workload.memory_bound(site) for site in trained
            ):
                self.pass_over(node, "a model whose memory sets the batch (large or sharded)")
                continue
            low = fine_tuned(module, trained)
            where = (
                loader.spelled("batch_size", str(size))
                if found.origin == "literal"
                else f"`{_code(value)}={size}`"
            )
            if found.origin in ("argparse", "config", "default", "argument"):
                where = f"{ORIGINS[found.origin]} {where}"
            elsewhere = found.origin == "project"  # the number is written in another file
            if elsewhere:
                where += ", a value another file of the project sets,"
            tiny_net = f" for a network of {max(sizes):,} parameters" if minimum > least else ""
            yield self.diagnostic(
                loader.call.node,
                f"{where} feeds a training loop{tiny_net}: batches this small leave the GPU "
                f"waiting on per-step overhead; raise it to at least {minimum} and rescale "
                "the learning rate with it (or find the largest batch that fits with "
                "`torchlint verify --tune-batch-size`)"
                + (f" (low impact: {LOW_REASON})" if low else ""),
                fix=None
                if elsewhere
                else fix(
                    f"Raise the batch size from {size} to {minimum}",
                    Applicability.UNSAFE,
                    Replace(found.node, cst.Integer(str(minimum))),
                ),
                impact=Impact.LOW if low else Impact.HIGH,
            )


def _sizes(module: TorchModule, loader: DataLoaderSite) -> list[int]:
    """The parameters of each network the loader trains, where every one of them can be
    read from its layers; [] otherwise (none seen, or one of unknown size)."""
    sizes = [module.networks.parameters(site) for site in trained_on(module, loader)]
    return [n for n in sizes if n is not None] if None not in sizes else []


def _code(node: cst.BaseExpression) -> str:
    return cst.Module(body=[]).code_for_node(node)
