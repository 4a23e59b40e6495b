"""TL701 hf-dataloader-sync-loading: the Hugging Face Trainer loads batches on the main process.

What: `transformers.TrainingArguments(...)` (or `Seq2SeqTrainingArguments`) without
`dataloader_num_workers`, or with it 0 (a literal, or a constant the file shows: an
argparse default, a config entry), on a GPU run (not `use_cpu=True`; `no_cuda=True`
before transformers 4.34), given to a `Trainer` whose `train_dataset` visibly does work
per sample: a transform set on a Hugging Face dataset (`with_transform`,
`set_transform`: decoding and augmenting images or audio as they are read), a
torchvision/torchaudio dataset or a transform passed, or a Dataset class of the file
whose `__getitem__` calls something (tokenizing, opening a file). The Trainer builds its
DataLoaders from these arguments, and `dataloader_num_workers` defaults to 0. Left
alone: datasets processed ahead (`load_dataset(...).map(tokenize, batched=True)`: the
Trainer only reads rows and pads them, a few percent of a step) and datasets whose origin
the file does not show (most often the same); arguments built from `*args`/`**kwargs` or
with more than the output directory given by position (what they set cannot be read);
`HfArgumentParser` dataclasses (the values come from the command line); TRL's configs
(`SFTConfig`...), whose defaults differ between versions. On by default: where per-sample
work is visible, the GPU waits for it (public scripts: docs/precision.md).

Why: with no workers, every sample is transformed (tokenized, decoded, augmented) and
every batch collated on the training process, between optimizer steps, while the GPU
waits. Worker processes prepare the next batches while the current one trains. The
Transformers GPU-training guide lists it under "Data preloading"; PyTorch's tuning
guide puts async data loading first.

Bad:
    train_set = load_dataset("beans", split="train").with_transform(augment)
    args = TrainingArguments("out", per_device_train_batch_size=32, bf16=True)
    Trainer(model=model, args=args, train_dataset=train_set).train()

Good:
    train_set = load_dataset("beans", split="train").with_transform(augment)
    args = TrainingArguments(
        "out", per_device_train_batch_size=32, bf16=True, dataloader_num_workers=NUM_WORKERS
    )
    Trainer(model=model, args=args, train_dataset=train_set).train()

Fix (unsafe): set `dataloader_num_workers=NUM_WORKERS`, the constant TL201 defines once
after the imports (the CPU cores this process may use, shared by the processes torchrun
starts on the machine, minus one). Unsafe because each worker holds a copy of the dataset
(memory) and random transforms draw from per-worker seeds. Offered only where workers can
start: under the `spawn` start method (macOS, Windows) and `forkserver` (Linux's default
from Python 3.14) each worker re-imports the script, so every `trainer.train()` on these
arguments must be in the file and run under `if __name__ == "__main__":` (or in a
function only called from there), and the `data_collator` and the `train_dataset` the
Trainer gets must not hold a lambda or a nested function (in a notebook: nothing the
notebook defines). Where one of these fails, or the 0 comes from a name or an option
(change it there), the finding says so and no fix is made.

Impact: Always high: every sample is transformed and every batch collated on the
training process between optimizer steps, while the GPU waits.

Unknown device: the Trainer picks the device, so the arguments are a GPU run unless they
ask for the CPU (`use_cpu=True`, `no_cuda=True` before transformers 4.34, read through
constants and option defaults), and a setting the file cannot read (`use_cpu=not
torch.cuda.is_available()`) counts as a GPU where there is one.

Sources: Transformers docs, "GPU" (efficient training on GPUs), "Data preloading", and
`TrainingArguments.dataloader_num_workers` ("0 means that the data will be loaded in the
main process"); PyTorch Performance Tuning Guide, "Enable async data loading and
augmentation"; torch.utils.data docs, "Platform-specific behaviors".
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import WORKERS_DEFINITION, WORKERS_NAME, set_kwarg
from torchlint.fixes import Applicability, FixSafety, Import, Replace, fix
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import MISSING, CallSite, TorchModule, argument

# `Trainer(model, args, data_collator, train_dataset, ...)`
TRAINER_PARAMS = ("model", "args", "data_collator", "train_dataset")


class HfDataloaderSyncLoading(Rule):
    code = "TL701"
    name = "hf-dataloader-sync-loading"
    fix_safety = FixSafety.UNSAFE
    tokens = ("TrainingArguments",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        frameworks = module.frameworks
        for args in frameworks.readable_gpu_arguments:
            if not any(
                module.datasets.works_per_sample(dataset, trainer.scope)
                for trainer in frameworks.trainers_given(args)
                if (dataset := argument(trainer.node, "train_dataset", TRAINER_PARAMS))
                is not MISSING
            ):
                continue
            workers = args.kwarg("dataloader_num_workers")
            if workers is not MISSING:
                found = module.values.constant(workers, args.scope)
                if found is None or found.value != 0:
                    continue
                hazard = (
                    None
                    if found.origin == "literal"
                    else "the 0 comes from a name or an option: change it there"
                )
            else:
                hazard = None
            what = (
                "`TrainingArguments` without `dataloader_num_workers`"
                if workers is MISSING
                else "`dataloader_num_workers=0`"
            )
            message = (
                f"{what}: the Trainer transforms every sample of this dataset and collates "
                "every batch on the main process while the GPU waits; set "
                "`dataloader_num_workers` to the CPU cores per process minus one"
            )
            hazard = hazard or _hazard(module, args)
            yield self.diagnostic(
                args.node,
                f"{message} (not fixed: {hazard})" if hazard else message,
                fix=None
                if hazard
                else fix(
                    f"Set `dataloader_num_workers={WORKERS_NAME}`",
                    Applicability.UNSAFE,
                    Replace(
                        args.node,
                        set_kwarg(args.node, "dataloader_num_workers", cst.Name(WORKERS_NAME)),
                    ),
                    imports=[Import("os")],
                    definitions=[WORKERS_DEFINITION],
                ),
            )


def _hazard(module: TorchModule, args: CallSite) -> str | None:
    """Why workers started by the Trainers given `args` could break the script."""
    trainers = module.frameworks.trainers_given(args)
    datasets = []
    functions = []
    for trainer in trainers:
        if any(a.star for a in trainer.node.args):
            return "the Trainer is built from `*args`/`**kwargs`"
        dataset = argument(trainer.node, "train_dataset", TRAINER_PARAMS)
        if dataset is not MISSING:
            datasets += module.datasets.held(dataset, trainer.scope)
        collator = argument(trainer.node, "data_collator", TRAINER_PARAMS)
        if collator is not MISSING:
            functions.append(("data_collator", collator, trainer.scope))
    starts = [(c.ctx, c.node) for c in module.frameworks.train_calls(trainers)]
    return module.datasets.start_hazard(datasets, functions, starts, "`trainer.train()`")
