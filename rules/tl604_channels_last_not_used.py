"""TL604 channels-last-not-used: a CNN trains in mixed precision in NCHW layout.

What: a training loop calls a network built of 2-d convolutions (the file shows its
`Conv2d` / `ConvTranspose2d` layers, or a torchvision CNN) that is moved to a GPU, in a
file that computes in reduced precision (autocast, `.half()`, bfloat16) and never
mentions `torch.channels_last`. Advice, so off by default (enable it with
`--extend-select TL604`): the gain depends on facts known at run time (a GPU with
tensor cores, Volta or newer; every operation of the model supporting the layout; the
share of time spent in convolutions). Files managed by Lightning, Accelerate, DeepSpeed
or the transformers Trainer are not checked.

Why: tensor-core convolutions work on channels-last (NHWC) data. Given the default NCHW
tensors, cuDNN transposes the input and output of every convolution, or picks a slower
kernel. Converting the model (its weights) and the input batch once with
`memory_format=torch.channels_last` lets every convolution run in its native layout;
the Performance Tuning Guide recommends it for computer-vision models "in conjunction
with AMP", and the Channels Last tutorial reports double-digit speed-ups for ResNets.

Bad:
    model = torchvision.models.resnet50().cuda()
    for images, labels in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(images.cuda()), labels.cuda())
        loss.backward()
        optimizer.step()

Good:
    model = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    for images, labels in loader:
        images = images.cuda().to(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(images), labels.cuda())
        loss.backward()
        optimizer.step()

Fix: none. `x.view(...)` on a channels-last activation raises (its strides no longer
match): a model's `forward` that flattens with `.view` needs `.reshape` or `.flatten`
first, which only reading the model can tell.

Impact: Always high: with tensor-core convolutions in reduced precision, NCHW tensors
cost a transpose or a slower kernel at every convolution of every step. A clear low
case, not told apart yet (reported high): toy networks (under 1M parameters), whose
convolutions take too little of a step for the layout to show.

Unknown device: silent, as only networks moved to a GPU are checked; the layout pays
with tensor-core convolutions, which a device that cannot be named may not have.

Sources: PyTorch Performance Tuning Guide, "Enable channels_last memory format for
computer vision models"; "(beta) Channels Last Memory Format in PyTorch" tutorial;
NVIDIA Deep Learning Performance Guide, "Tensor Layouts In Memory: NCHW vs NHWC".
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.fixes import FixSafety
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule

LAYOUTS = ("torch.channels_last", "torch.channels_last_3d")
PLANAR = frozenset({"Conv2d", "ConvTranspose2d", "LazyConv2d", "LazyConvTranspose2d"})


class ChannelsLastNotUsed(Rule):
    code = "TL604"
    name = "channels-last-not-used"
    fix_safety = FixSafety.NONE
    default_enabled = False
    tokens = ("Conv2d", "torchvision")
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if not module.workload.reduced_precision:
            return
        if any(
            module.resolve(a.value, c.scope) in LAYOUTS for c in module.calls for a in c.node.args
        ):
            return
        for site in module.trained_on_gpu:
            assert site.construction is not None  # `trained_on_gpu` holds sites built here
            zoo = (site.construction.qualname or "").startswith("torchvision.models.")
            planar = not PLANAR.isdisjoint(module.networks.layers(site))
            if not (planar or (zoo and module.networks.convolutional(site))):
                continue
            move = next((m for m in site.moves if (d := module.devices.move(m)) and d.is_gpu), None)
            yield self.diagnostic(
                move.node if move is not None else site.construction.node,
                f"`{site.name}` is a CNN trained in mixed precision in the default NCHW "
                "layout: tensor-core convolutions want channels-last; convert the model and "
                "the batches with `.to(memory_format=torch.channels_last)`",
            )
