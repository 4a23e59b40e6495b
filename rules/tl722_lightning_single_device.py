"""TL722 lightning-single-device: `devices=1` hard-coded in a Lightning Trainer.

What: a PyTorch Lightning `Trainer(...)` on a GPU run (not `accelerator="cpu"`) with
`devices=1` (or `gpus=1`, its Lightning 1.x spelling; a literal or a constant the file
shows, not an option the user sets). The default, `devices="auto"`, uses every GPU of the
machine. Not reported where the LightningModules of the file that the Trainer's `fit` is
given are toys (under 1M parameters, counted from their layers' sizes; a module passed
in from elsewhere, or of a size the file does not show, counts as large): one GPU is
more than such a model can use, and DDP only adds a gradient all-reduce to each step.
Off by default: how many GPUs the machine running the script has, and whether the
training is meant to scale (a bigger global batch, a learning rate to match) are not in
the file; enable it with `--extend-select TL722` on multi-GPU hosts.

Why: on a machine with several GPUs, a Trainer pinned to one leaves the others idle;
Lightning's DDP (the default strategy for several devices) trains on all of them with one
process each.

Bad:
    trainer = L.Trainer(accelerator="gpu", devices=1)

Good:
    trainer = L.Trainer(accelerator="gpu", devices="auto")  # every GPU of the machine

Fix: none. Going from one process to DDP changes the global batch (per-device batch times
the GPU count), runs the script once per GPU (files written, metrics logged without
`sync_dist=True`), fails on models with unused parameters (`find_unused_parameters` is
off by default), and cannot start from a notebook that already used CUDA: a change to
make on purpose.

Impact: Always high: Trainers of toy modules, which more GPUs would not speed up, are
not reported; elsewhere each GPU added takes its share of every epoch.

Unknown device: Lightning picks the device, so a Trainer is a GPU run unless it asks for
the CPU (`accelerator="cpu"`, read through constants), and an `accelerator=` the file
cannot read counts as a GPU where there is one (Lightning's default, "auto", takes it);
with `pytorch_lightning` (1.x trains on the CPU by default) only a Trainer that asks for
a device counts.

Sources: Lightning docs, "GPU training (Basic)" (`devices`, `"auto"`) and "GPU training
(Intermediate)" (DDP: "Each GPU across each node gets its own process"); Trainer API,
`devices` (default `"auto"`).
"""

from __future__ import annotations

from collections.abc import Iterator

from torchlint.fixes import FixSafety
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, CallSite, TorchModule, opaque, toy


class LightningSingleDevice(Rule):
    code = "TL722"
    name = "lightning-single-device"
    default_enabled = False
    fix_safety = FixSafety.NONE
    tokens = ("Trainer",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        frameworks = module.frameworks
        for trainer in frameworks.trainers:
            if opaque(trainer, 0) or not frameworks.on_gpu(trainer):
                continue
            if _toy(module, trainer):
                continue
            for name in ("devices", "gpus"):
                value = trainer.kwarg(name)
                found = (
                    module.values.constant(value, trainer.scope) if value is not MISSING else None
                )
                if found is None or found.value != 1 or isinstance(found.value, bool):
                    continue
                if found.origin == "argparse":
                    continue
                yield self.diagnostic(
                    value,
                    f"`{name}=1` trains on one GPU whatever the machine has; on a multi-GPU "
                    'host `devices="auto"` trains on all of them with DDP (mind the global '
                    "batch size and `sync_dist=True` for logged metrics)",
                )


def _toy(module: TorchModule, trainer: CallSite) -> bool:
    """The LightningModules the Trainer trains hold fewer than a million parameters."""
    classes = module.frameworks.trained_modules(trainer)
    return toy(module.networks.class_parameters(c) for c in classes)
