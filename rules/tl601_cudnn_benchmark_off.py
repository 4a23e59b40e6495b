"""TL601 cudnn-benchmark-off: a convolutional network trains without cuDNN's autotuner.

What: a training loop (or an ignite engine: its process function, or
`create_supervised_trainer(model, ...)`) calls a network that convolves (a `Conv*d` /
`ConvTranspose*d` layer the file shows, or a torchvision CNN) and that is moved to a
GPU, in a file that never sets `torch.backends.cudnn.benchmark`. It pays when the input
shapes stay the same from step to step, a fact known at run time (images resized or
cropped to one size: yes; variable sequence lengths, multi-scale detection, a last batch
of each size: a new search per new shape), which the message says. On by default since
2026-12-06: judged on the development corpus, 15 of the 16 findings it shows (its toy
networks hidden) were worth the line. An explicit `cudnn.benchmark = False` is a
decision and is not reported, nor is a file that asks for reproducible kernels
(`cudnn.deterministic = ...`, `torch.use_deterministic_algorithms(...)`, or any call
given `deterministic=True`, as `init_seeds(seed, deterministic=True)`): timing picks the
algorithms anew each run. Files managed by Lightning, Accelerate, DeepSpeed or the
transformers Trainer are not checked (Lightning's `Trainer(benchmark=...)` says it).

Why: cuDNN has several algorithms for each convolution and, by default, picks one with
a heuristic. With `benchmark = True` it times the candidates the first time it meets a
shape and keeps the fastest for that shape: a one-off cost on the first step, then
often markedly faster convolutions, forward and backward. The Performance Tuning Guide
recommends setting it "before launching the training loop" for convolutional networks.

Bad:
    model = torchvision.models.resnet18().cuda()
    for images, labels in loader:  # 224x224 crops every step
        loss = criterion(model(images.cuda()), labels.cuda())
        loss.backward()
        optimizer.step()

Good:
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet18().cuda()
    for images, labels in loader:
        loss = criterion(model(images.cuda()), labels.cuda())
        loss.backward()
        optimizer.step()

Fix (unsafe): add `torch.backends.cudnn.benchmark = True` after the imports. Unsafe
because the algorithm the search picks may differ from run to run (results are no
longer bit-for-bit reproducible), it may pick one that needs more workspace memory, and
with input shapes that keep changing it searches again for every new shape.

Impact: high: with input shapes that stay the same, autotuned convolutions speed up
every step after the first, forward and backward. Low where the convolutional networks
are toys (under 1M parameters together, counted from their layers: an MNIST CNN), whose
convolutions take too little of a step for the choice of algorithm to show.

Unknown device: silent, as only networks moved to a GPU are checked; cuDNN's autotuner
does nothing where a device that cannot be named is the CPU.

Sources: PyTorch Performance Tuning Guide, "Enable cuDNN auto-tuner"; PyTorch docs,
"torch.backends" (`torch.backends.cudnn.benchmark`) and "Reproducibility" notes.
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.edits import spell
from torchlint.fixes import Applicability, Definition, FixSafety, fix
from torchlint.results import Impact
from torchlint.rule import TRAINS, Diagnostic, Rule
from torchlint.semantic import Loop, ModelSite, TorchModule, bool_value, toy

BENCHMARK = "torch.backends.cudnn.benchmark"
DETERMINISTIC = "torch.backends.cudnn.deterministic"
DETERMINISTIC_ALGORITHMS = "torch.use_deterministic_algorithms"
TINY = "networks of under 1M parameters: too little convolution for the algorithm to show"
SMALL_IMAGES = "a step on small images (MNIST, CIFAR: at most 64x64): little convolution to tune"


class CudnnBenchmarkOff(Rule):
    code = "TL601"
    name = "cudnn-benchmark-off"
    fix_safety = FixSafety.UNSAFE
    tokens = ("Conv", "torchvision")
    pattern = TRAINS  # a step loop of its own (or the project engages the file)
    skips_managed = True

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.stores_to(BENCHMARK, DETERMINISTIC):
            return
        if module.calls_to(DETERMINISTIC_ALGORITHMS):
            return
        if any(bool_value(c.kwarg("deterministic")) for c in module.calls):
            return  # reproducible kernels asked through a helper: `init_seeds(deterministic=True)`
        convolutional = [s for s in module.trained_on_gpu if module.networks.convolutional(s)]
        if not convolutional:
            return
        where = module.where_trained(convolutional)
        if where is None:
            return
        why = None
        if toy(module.networks.parameters(s) for s in convolutional):
            why = TINY
        elif (loops := _loops(module, convolutional)) and all(
            module.datasets.small_images(loop) for loop in loops
        ):
            why = SMALL_IMAGES
        spelled, imp = spell(module, BENCHMARK)
        yield self.diagnostic(
            where,
            f"`{convolutional[0].name}` convolves on the GPU with cuDNN's autotuner off: "
            "with `torch.backends.cudnn.benchmark = True` cuDNN times its algorithms for "
            "each input shape and keeps the fastest (worth it when shapes do not change "
            "between steps)" + (f" (low impact: {why})" if why else ""),
            fix=fix(
                "Set `torch.backends.cudnn.benchmark = True` after the imports",
                Applicability.UNSAFE,
                imports=[imp] if imp else [],
                definitions=[Definition(BENCHMARK, f"{spelled} = True\n")],
            ),
            impact=Impact.LOW if why else Impact.HIGH,
        )


def _loops(module: TorchModule, sites: list[ModelSite]) -> list[Loop]:
    """The step loops that call these networks."""
    return [
        loop
        for loop in module.step_loops
        if any(module.models.called(c) in sites for c in loop.calls)
    ]
