"""TL601 cudnn-benchmark-off: a convolutional network trains without cuDNN's autotuner.

What: a training loop calls a network that convolves (a `Conv*d` / `ConvTranspose*d`
layer the file shows, or a torchvision CNN) and that is moved to a GPU, in a file that
never sets `torch.backends.cudnn.benchmark`. Advice, so off by default (enable it with
`--extend-select TL601`): it pays only when the input shapes stay the same from step
to step, a fact known at run time (images resized or cropped to one size: yes; variable
sequence lengths, multi-scale detection, a last batch of each size: a new search per
new shape). An explicit `cudnn.benchmark = False` is a decision and is not reported,
nor is a file that asks for reproducible kernels (`cudnn.deterministic = ...`,
`torch.use_deterministic_algorithms(...)`): timing picks the algorithms anew each run.
Files managed by Lightning, Accelerate, DeepSpeed or the transformers Trainer are not
checked (Lightning's `Trainer(benchmark=...)` says it).

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

Impact: Always high: with input shapes that stay the same (a run-time fact, hence off by
default), autotuned convolutions speed up every step after the first, forward and
backward. A clear low case, not told apart yet (reported high): toy networks (under 1M
parameters, an MNIST CNN), whose convolutions take too little of a step for the choice
of algorithm to show.

Unknown device: silent, as only networks moved to a GPU are checked; cuDNN's autotuner
does nothing where a device that cannot be named is the CPU.

Sources: PyTorch Performance Tuning Guide, "Enable cuDNN auto-tuner"; PyTorch docs,
"torch.backends" (`torch.backends.cudnn.benchmark`) and "Reproducibility" notes.
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.edits import spell
from torchlint.fixes import Applicability, Definition, FixSafety, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule

BENCHMARK = "torch.backends.cudnn.benchmark"
DETERMINISTIC = "torch.backends.cudnn.deterministic"
DETERMINISTIC_ALGORITHMS = "torch.use_deterministic_algorithms"


class CudnnBenchmarkOff(Rule):
    code = "TL601"
    name = "cudnn-benchmark-off"
    fix_safety = FixSafety.UNSAFE
    default_enabled = False
    tokens = ("Conv", "torchvision")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.managed or module.stores_to(BENCHMARK, DETERMINISTIC):
            return
        if module.calls_to(DETERMINISTIC_ALGORITHMS):
            return
        convolutional = [s for s in module.trained_on_gpu if module.networks.convolutional(s)]
        if not convolutional:
            return
        outermost = module.training_loop_of(convolutional)
        if outermost is None:
            return
        spelled, imp = spell(module, BENCHMARK)
        yield self.diagnostic(
            outermost.node,
            f"`{convolutional[0].name}` convolves on the GPU with cuDNN's autotuner off: "
            "with `torch.backends.cudnn.benchmark = True` cuDNN times its algorithms for "
            "each input shape and keeps the fastest (worth it when shapes do not change "
            "between steps)",
            fix=fix(
                "Set `torch.backends.cudnn.benchmark = True` after the imports",
                Applicability.UNSAFE,
                imports=[imp] if imp else [],
                definitions=[Definition(BENCHMARK, f"{spelled} = True\n")],
            ),
        )
