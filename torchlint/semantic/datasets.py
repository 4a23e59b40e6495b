"""Datasets and the worker processes that load them: what a DataLoader's dataset is made
of (tensors in memory, a Dataset class whose `__getitem__` reads or decodes, one of
torchvision's, an IterableDataset, or a class of another file of the project, as its
summary says), and what could stop DataLoader workers from starting under `spawn` /
`forkserver` (no main guard where they start, lambdas, nested functions, classes a
notebook defines)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.external import Class, Dataset
from torchlint.semantic.functions import Functions
from torchlint.semantic.loaders import DataLoaderSite
from torchlint.semantic.samples import PADDING_COLLATORS, large_dataset, pads, text_samples
from torchlint.semantic.scopes import (
    CallSite,
    Context,
    Kind,
    Loop,
    Scope,
    assigned_values,
    bindings,
)
from torchlint.semantic.syntax import MISSING
from torchlint.semantic.values import Values
from torchlint.text.walk import children, descendants

TENSOR_DATASET = "torch.utils.data.TensorDataset"
# Hugging Face datasets: a function run on each sample as it is read.
HF_TRANSFORMS = ("with_transform", "set_transform")
# Libraries whose datasets decode and transform each sample.
DECODING = ("torchvision.", "torchaudio.", "torchtext.")
# torchvision datasets of small images of one size: (channels, height, width).
SMALL_IMAGES = dict.fromkeys(
    ("MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST"), (1, 28, 28)
) | dict.fromkeys(("CIFAR10", "CIFAR100", "SVHN"), (3, 32, 32))
# Transforms that set the image size (an int: square), and the largest side kept as tiny.
RESIZING = ("Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop")
SMALL_SIDE = 64
# A batch this small (bytes: CIFAR at a batch of 256) is copied in a fraction of a
# millisecond: little worth overlapping.
TINY_BATCH = 4 << 20
# Parts of a dataset, whose samples are the dataset's.
SUBSETS = (
    *("torch.utils.data.Subset", "torch.utils.data.random_split"),
    *("torch.utils.data.dataset.Subset", "torch.utils.data.dataset.random_split"),
)
ITERABLE_DATASET = "torch.utils.data.IterableDataset"
# Datasets that are iterable pipes (torchtext's datasets since 0.12, torchdata's pipes).
PIPES = ("torchtext.datasets.", "torchdata.datapipes.iter.")
# Hugging Face `datasets` methods that return a dataset whose rows were computed ahead
# (`PROCESSED`: `map` stores what it returns; `with_format("torch")` reads them as tensors)
# or that only select, rename or reorder rows and columns.
PROCESSED = frozenset({"map", "with_format", "set_format"})
HF_METHODS = PROCESSED | {
    "rename_column", "rename_columns", "remove_columns", "select_columns", "filter",
    "shuffle", "select", "train_test_split", "flatten", "cast", "cast_column", "sort",
    "shard", "take", "skip",
}  # fmt: skip
Guard = Callable[[Context, cst.CSTNode | None], bool]


class Datasets:
    def __init__(
        self, facts: Facts, functions: Functions, values: Values, guarded: Guard, notebook: bool
    ) -> None:
        self.facts = facts
        self.functions = functions
        self.values = values
        self.guarded = guarded  # code runs under the main guard only (Runs.guarded)
        self.notebook = notebook

    @cached_property
    def _transforms_set(self) -> list[CallSite]:
        """`ds.set_transform(...)`, `ds.with_transform(...)` calls."""
        return [c for m in HF_TRANSFORMS for c in self.facts.calls_by_method.get(m, ())]

    def _exported(self, value: cst.Call, scope: Scope) -> Dataset | None:
        """The Dataset facts of a class of another file of the project it builds."""
        found = self.functions.export(value.func, scope)
        return found.dataset if isinstance(found, Class) else None

    def dataset_values(self, loader: DataLoaderSite) -> list[tuple[cst.BaseExpression, Scope]]:
        """The dataset expression of a loader, and what the name it is holds (one level)."""
        dataset = loader.arg("dataset")
        return [] if dataset is MISSING else self.held(dataset, loader.call.scope)

    def held(
        self, node: cst.BaseExpression, scope: Scope
    ) -> list[tuple[cst.BaseExpression, Scope]]:
        """An expression, and what the name it is holds (one level), with what calls add
        to that list (`trans.insert(0, transforms.Resize(resize))`, `.append`, `.extend`)."""
        found = [(node, scope)]
        found += [
            (b.value, b.ctx.scope)
            for b in bindings(node, scope)
            if b.kind is Kind.ASSIGN and b.value is not None
        ]
        return found + self.functions.added_to(node, scope)

    def _transform(self, arg: cst.Arg, scope: Scope) -> bool:
        """A transform passed to a dataset: `transform=...`, or a torchvision transform."""
        if arg.keyword is not None and "transform" in arg.keyword.value:
            return True
        value = arg.value
        return isinstance(value, cst.Call) and (scope.resolve(value.func) or "").startswith(
            "torchvision.transforms"
        )

    def plain_data(self, loader: DataLoaderSite) -> bool:
        """Where the dataset comes from shows it does no work per sample, so worker
        processes would only add overhead: tensors already in memory (`TensorDataset`, a
        list), a Dataset class of this file whose `__getitem__` calls nothing, or a dataset
        class from elsewhere built without any transform (`MyTrainDataset(2048)`). A
        torchvision dataset, a transform passed, or an origin we cannot see: not plain."""
        return self._dataset_is(loader, self._plain)

    def _dataset_is(
        self, loader: DataLoaderSite, test: Callable[[cst.BaseExpression, Scope], bool]
    ) -> bool:
        """Every value the loader's dataset may be passes `test` (and some is known)."""
        dataset = loader.arg("dataset")
        if dataset is MISSING:
            return False
        origins = self.values.origins(dataset, loader.call.scope)
        return bool(origins) and all(test(value, scope) for value, scope in origins)

    def _built(
        self, value: cst.BaseExpression, scope: Scope
    ) -> bool | tuple[cst.Call, str | None, Dataset | None]:
        """What a dataset expression is: a literal sequence (True: in memory, sized), not
        a call (False: unknown), or the call that builds it, with its qualname and, for a
        class of another file of the project, that class's Dataset facts."""
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
            return True
        if not isinstance(value, cst.Call):
            return False
        qualname = scope.resolve(value.func)
        return value, qualname, self._exported(value, scope) if qualname is not None else None

    def large(self, loader: DataLoaderSite) -> str | None:
        """The name of a data set of 100,000 samples or more the loader reads
        (`samples.large_dataset`): an epoch of thousands of steps."""
        for value, scope in self.dataset_values(loader):
            if isinstance(value, cst.Call) and (found := large_dataset(self.values, value, scope)):
                return found
        return None

    def text_data(self, loader: DataLoaderSite) -> bool:
        """Every dataset the loader may read returns strings only (a class of this file or
        of another one: `samples.text_samples`): its batches are lists of text."""
        return self._dataset_is(loader, self._text)

    def _text(self, value: cst.BaseExpression, scope: Scope) -> bool:
        built = self._built(value, scope)
        if isinstance(built, bool):
            return False
        call, _, exported = built
        if exported is not None:
            return exported.text
        cls = self.functions.class_scope(call.func, scope)
        return cls is not None and text_samples(cls)

    def _plain(self, value: cst.BaseExpression, scope: Scope) -> bool:
        built = self._built(value, scope)
        if isinstance(built, bool):
            return built
        value, qualname, exported = built
        if qualname == TENSOR_DATASET:
            return True
        if exported is not None:  # a Dataset class of another file of the project
            return exported.plain and not any(self._transform(a, scope) for a in value.args)
        if qualname is not None:
            return not qualname.startswith(DECODING) and not any(
                self._transform(a, scope) for a in value.args
            )
        cls = self.functions.class_scope(value.func, scope)
        getitem = cls.member("__getitem__") if cls is not None else None
        method = getitem.only(Kind.DEF) if getitem is not None else None
        if method is None:
            return False
        assert isinstance(method.node, cst.FunctionDef)
        return not any(isinstance(n, cst.Call) for n in descendants(method.node.body))

    def works_per_sample(self, node: cst.BaseExpression, scope: Scope, _depth: int = 0) -> bool:
        """The dataset visibly does work per sample: a transform set on a Hugging Face
        dataset (`with_transform`, `set_transform`), a torchvision/torchaudio/torchtext
        dataset, a transform passed, or a Dataset class of this file whose `__getitem__`
        calls something (tokenizing, opening an image). Unknown origins and datasets
        processed ahead (`load_dataset(...).map(tokenize)`) do not."""
        while isinstance(node, cst.Subscript):  # `tokenized["train"]`
            node = node.value
        if _depth > 4:
            return False
        if isinstance(node, cst.Name) and any(
            isinstance(c.receiver, cst.Name) and c.receiver.value == node.value
            for c in self._transforms_set
        ):
            return True  # `ds.set_transform(augment)`
        for value, where in self.values.origins(node, scope):
            if isinstance(value, cst.Subscript):
                if self.works_per_sample(value, where, _depth + 1):
                    return True
                continue
            if not isinstance(value, cst.Call):
                continue
            func = value.func
            qualname = where.resolve(func)
            if isinstance(func, cst.Attribute) and qualname is None:
                if func.attr.value in HF_TRANSFORMS:
                    return True
                if self.works_per_sample(func.value, where, _depth + 1):  # `ds.map(...)`
                    return True
            elif qualname is not None:
                exported = self._exported(value, where)
                if exported is not None and exported.per_sample:
                    return True
                if qualname.startswith(DECODING) or any(
                    self._transform(a, where) for a in value.args
                ):
                    return True
            elif self.functions.class_scope(func, where) and not self._plain(value, where):
                return True
        return False

    def wants_workers(self, loader: DataLoaderSite) -> bool:
        """Worker processes would hide real per-sample work (TL201 asks for them, with
        high impact): neither plain data, an IterableDataset, nor `cheap_samples`."""
        return not (
            self.plain_data(loader)
            or self.iterable_dataset(loader)
            or self.cheap_samples(loader) is not None
        )

    def cheap_samples(self, loader: DataLoaderSite) -> str | None:
        """Why reading and collating a sample is cheap (workers would hide a few percent):
        rows of a Hugging Face dataset processed ahead (`.map(tokenize)`,
        `.with_format("torch")`) or tensors in memory, collated by padding and stacking
        only (the default collate, `tokenizer.pad`, `pad_sequence`, Hugging Face's padding
        collators); None otherwise."""
        hf = self.processed_data(loader)

        def stored(value: cst.BaseExpression, scope: Scope) -> bool:
            return self._plain(value, scope) or (hf and self._hf(value, scope, set())[0])

        if not self._dataset_is(loader, stored):
            return None
        dataset = loader.arg("dataset")
        assert dataset is not MISSING
        if self.works_per_sample(dataset, loader.call.scope):
            return None
        collate = loader.arg("collate_fn")
        if collate is not MISSING and not self._padding_only(collate, loader.call.scope):
            return None
        what = "a Hugging Face dataset processed ahead" if hf else "tensors in memory"
        return f"{what}, collated by padding only"

    def processed_data(self, loader: DataLoaderSite) -> bool:
        """Some origin of the loader's dataset is a Hugging Face dataset processed ahead
        (its samples are stored rows: token ids where a tokenizer mapped them)."""
        dataset = loader.arg("dataset")
        return dataset is not MISSING and any(
            self.processed(v, s) for v, s in self.values.origins(dataset, loader.call.scope)
        )

    def processed(self, node: cst.BaseExpression, scope: Scope) -> bool:
        """A Hugging Face dataset (`datasets.load_dataset(...)`, `Dataset.from_*`...)
        through `HF_METHODS` and subscripts (`tokenized["train"]`), at least one of them
        `PROCESSED` (`ds.map(tokenize)`, `ds.with_format("torch")`)."""
        hf, done = self._hf(node, scope, set())
        return hf and done

    def _hf(self, node: cst.BaseExpression, scope: Scope, seen: set[int]) -> tuple[bool, bool]:
        """(a Hugging Face dataset, processed on the way); a name rebound in terms of
        itself (`ds = ds.map(f)`) is read once, and what it holds on other paths may be
        tensors in memory (`TensorDataset`)."""
        done = False
        while True:
            while isinstance(node, cst.Subscript):
                node = node.value
            if id(node) in seen:
                return True, False
            seen.add(id(node))
            if isinstance(node, cst.Name):
                found = [(v, s) for v, s in self.values.origins(node, scope) if v is not node]
                results = [
                    (True, False) if self._plain(v, s) else self._hf(v, s, seen) for v, s in found
                ]
                hf = bool(results) and all(r[0] for r in results)
                return hf, done or any(r[1] for r in results)
            if not isinstance(node, cst.Call):
                return False, False
            qualname = scope.resolve(node.func)
            if qualname is not None:
                return qualname.startswith("datasets."), done
            if not isinstance(node.func, cst.Attribute) or node.func.attr.value not in HF_METHODS:
                return False, False
            done = done or node.func.attr.value in PROCESSED
            node = node.func.value

    def _padding_only(self, node: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        """A collate function that only pads and stacks: a known collator, or a function
        of this file (what a factory returns included) whose calls are all `PADDING`."""
        if depth > 3:
            return False
        if isinstance(node, cst.Call):
            qualname = scope.resolve(node.func)
            if qualname in PADDING_COLLATORS:
                return True
            called = self.functions.returned(node.func, scope)
            if called is None:
                return False
            returned, inner = called
            return bool(returned) and all(self._padding_only(r, inner, depth + 1) for r in returned)
        if scope.resolve(node) in PADDING_COLLATORS:
            return True
        found = bindings(node, scope)
        if not found:
            return False
        for b in found:
            if b.kind is Kind.DEF:
                assert isinstance(b.node, cst.FunctionDef)
                if not pads(b.node):
                    return False
            elif not (
                b.kind is Kind.ASSIGN
                and b.value is not None
                and self._padding_only(b.value, b.ctx.scope, depth + 1)
            ):
                return False
        return True

    def iterable_dataset(self, loader: DataLoaderSite) -> bool:
        """The dataset is an `IterableDataset` (no sampler; workers need sharding): one of
        this file or of another file of the project, or a torchtext/torchdata pipe (also
        where several are unpacked from one call: `train, valid = Multi30k(...)`)."""
        found = self.dataset_values(loader)
        dataset = loader.arg("dataset")
        if dataset is not MISSING:
            found += [
                (b.source, b.ctx.scope)
                for b in bindings(dataset, loader.call.scope)
                if b.kind is Kind.ASSIGN and b.value is None and b.source is not None
            ]
        for value, scope in found:
            if not isinstance(value, cst.Call):
                continue
            qualname = scope.resolve(value.func) or ""
            if qualname == ITERABLE_DATASET or qualname.startswith(PIPES):
                return True
            exported = self._exported(value, scope)
            if exported is not None and exported.iterable:
                return True
            cls = self.functions.class_scope(value.func, scope)
            if cls is not None and cls.parent is not None:
                assert isinstance(cls.node, cst.ClassDef)
                if any(cls.parent.resolve(b.value) == ITERABLE_DATASET for b in cls.node.bases):
                    return True
        return False

    def batch_bytes(self, loader: DataLoaderSite) -> int | None:
        """At most how many bytes a batch of the loader holds, where its dataset is a
        torchvision dataset of small images (MNIST, CIFAR: float32 after `ToTensor`, at
        most 64x64 after a resize or crop of a constant size) and its `batch_size` a
        constant; None otherwise."""
        size = loader.arg("batch_size")
        found = self.values.constant(size, loader.call.scope) if size is not MISSING else None
        batch = found.value if found is not None else 1 if size is MISSING else None
        dataset = loader.arg("dataset")
        if not isinstance(batch, int) or isinstance(batch, bool) or dataset is MISSING:
            return None
        origins = self.values.origins(dataset, loader.call.scope)
        samples = [self._sample_bytes(value, scope) for value, scope in origins]
        if not samples or any(s is None for s in samples):
            return None
        return batch * max(s for s in samples if s is not None)

    def small_images(self, loop: Loop) -> bool:
        """Every loader the loop iterates is one of this file whose samples are small
        images (`batch_bytes`' datasets: MNIST, CIFAR, at most 64x64 after a constant
        resize or crop), whatever its batch size: little work a step for tensor cores or
        cuDNN's choice of algorithm."""
        loaders = loop.loaders
        return bool(loaders) and all(
            isinstance(x, DataLoaderSite) and self._small_samples(x) for x in loaders
        )

    def _small_samples(self, loader: DataLoaderSite) -> bool:
        dataset = loader.arg("dataset")
        if dataset is MISSING:
            return False
        origins = self.values.origins(dataset, loader.call.scope)
        return bool(origins) and all(self._sample_bytes(v, s) is not None for v, s in origins)

    def _sample_bytes(self, value: cst.BaseExpression, scope: Scope, depth: int = 0) -> int | None:
        if not isinstance(value, cst.Call):
            return None
        qualname = scope.resolve(value.func) or ""
        if qualname in SUBSETS and value.args and depth < 3:  # a part of another dataset
            origins = self.values.origins(value.args[0].value, scope)
            parts = [self._sample_bytes(v, w, depth + 1) for v, w in origins]
            known = [n for n in parts if n is not None]
            return max(known) if known and len(known) == len(parts) else None
        shape = SMALL_IMAGES.get(qualname.removeprefix("torchvision.datasets."))
        if shape is None or not qualname.startswith("torchvision.datasets."):
            return None
        channels, height, width = shape
        for arg in value.args:
            if arg.keyword is None or "transform" not in arg.keyword.value:
                continue
            for transform, _ in self.held(arg.value, scope):
                for node in descendants(transform):
                    if not isinstance(node, cst.Call):
                        continue
                    name = (scope.resolve(node.func) or "").rpartition(".")[2]
                    if name not in RESIZING:
                        continue
                    side = self._side(node.args[0].value, scope) if node.args else None
                    if side is None or side > SMALL_SIDE:
                        return None
                    height = width = max(side, 1)
        return 4 * channels * height * width + 8  # float32 pixels and an int64 label

    def _side(self, node: cst.BaseExpression, scope: Scope) -> int | None:
        """The largest side a resize or crop sets: an int, or a tuple of ints `(h, w)`."""
        parts = [e.value for e in node.elements] if isinstance(node, cst.Tuple) else [node]
        sides = [self.values.constant(part, scope) for part in parts]
        values = [s.value for s in sides if s is not None and type(s.value) is int]
        return max(values) if values and len(values) == len(parts) else None

    def map_style(self, loader: DataLoaderSite) -> bool:
        """The loader has a length: default batching over a dataset known to define
        `__len__` (tensors in memory, a torchvision image dataset, a Dataset class of
        this file with `__len__` that is not an IterableDataset)."""
        if loader.arg("batch_sampler") is not MISSING or self.iterable_dataset(loader):
            return False
        return self._dataset_is(loader, self._sized)

    def _sized(self, value: cst.BaseExpression, scope: Scope) -> bool:
        built = self._built(value, scope)
        if isinstance(built, bool):
            return built
        value, qualname, exported = built
        if exported is not None:  # a Dataset class of another file of the project
            return exported.sized
        if qualname is not None:
            return qualname == TENSOR_DATASET or qualname.startswith("torchvision.datasets.")
        cls = self.functions.class_scope(value.func, scope)
        return cls is not None and cls.member("__len__") is not None

    def workers_hazard(self, loader: DataLoaderSite) -> str | None:
        """Why starting worker processes for this loader could break a script that runs
        (under the `spawn` start method of macOS and Windows, and `forkserver`, Linux's
        default from Python 3.14, each worker re-imports the script and unpickles the
        dataset and functions it is given); None when nothing stands in the way. Workers
        start in the loops over the loader, or where a framework that trains on it starts
        training (`trainer.fit(...)`)."""
        scope = loader.call.scope
        functions = [
            (n, v, scope)
            for n in ("collate_fn", "worker_init_fn")
            if (v := loader.arg(n)) is not MISSING
        ]
        starts: list[tuple[Context, cst.CSTNode]]
        outside = loader.outside
        if not loader.loops and outside is not None and outside.trains:
            if not outside.guarded:  # the loops are in another file of the project
                return (
                    f"the loop over this loader ({outside.where}) may run outside "
                    '`if __name__ == "__main__":`: under spawn/forkserver each worker re-runs '
                    "the script that starts it; add the guard"
                )
            starts, where = [], ""
        elif loader.loops or not loader.trained_by_framework:
            starts = [(lp.ctx, lp.node) for lp in loader.loops]
            where = "the loop over this loader"
        else:
            starts = [(c.ctx, c.node) for c in loader.starts]
            where = "`trainer.fit(...)`"
        elsewhere = not loader.loops and outside is not None and outside.trains
        return self.start_hazard(
            self.dataset_values(loader), functions, starts, where, guarded_elsewhere=elsewhere
        )

    def start_hazard(
        self,
        datasets: list[tuple[cst.BaseExpression, Scope]],
        functions: list[tuple[str, cst.BaseExpression, Scope]],
        starts: Sequence[tuple[Context, cst.CSTNode]],
        where: str,
        guarded_elsewhere: bool = False,
    ) -> str | None:
        """Why DataLoader workers started at `starts` (named `where` in the reason) could
        break a script that runs, given the datasets and the functions (`collate_fn`...)
        they receive; None when nothing stands in the way (see `workers_hazard`).
        `guarded_elsewhere`: they start in another file of the project, under the main
        guard."""
        passed = [*datasets, *((v, s) for _, v, s in functions)]
        if self.notebook:
            # Spawned workers do not re-run a notebook, but they cannot import what it defines.
            if any(self._defined_here(v, s) for v, s in passed):
                return (
                    "in a notebook, workers started with spawn cannot import the classes and "
                    "functions the notebook defines: move the Dataset (and collate_fn) to a module"
                )
        elif not starts and not guarded_elsewhere:
            return (
                f"{where} is not in this file: under spawn/forkserver each worker re-imports "
                'the script that runs it, which must do so under `if __name__ == "__main__":`'
            )
        elif not guarded_elsewhere and not all(self.guarded(ctx, node) for ctx, node in starts):
            return (
                f'{where} is not under `if __name__ == "__main__":`: under '
                "spawn/forkserver each worker re-runs the script and fails; add the guard"
            )
        for name, value, scope in functions:
            if not self._picklable(value, scope):
                return (
                    f"`{name}` is a lambda or a nested function, which spawned workers cannot "
                    "receive: make it a module-level function"
                )
        if any(self._holds_lambda(v, s) for v, s in datasets):
            return (
                "the dataset holds a lambda (`transforms.Lambda(lambda ...)`?), which spawned "
                "workers cannot receive: use a module-level function"
            )
        return None

    def _picklable(self, node: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        if isinstance(node, cst.Lambda):
            return False
        if depth > 3:
            return True
        if isinstance(node, cst.Call):
            if scope.resolve(node.func) == "functools.partial" and node.args:
                return self._picklable(node.args[0].value, scope, depth + 1)
            found = self.functions.returned(node.func, scope)
            if found is not None:
                returned, inner = found
                return all(self._picklable(r, inner, depth + 1) for r in returned)
            return True
        for b in bindings(node, scope):
            if b.kind is Kind.DEF and b.symbol.scope.function is not None:
                return False  # a nested function (a closure)
            if (
                b.kind is Kind.ASSIGN
                and b.value is not None
                and not self._picklable(b.value, b.ctx.scope, depth + 1)
            ):
                return False
        return True

    def _defined_here(self, node: cst.CSTNode, scope: Scope, depth: int = 0) -> bool:
        """The expression uses a class or function this file defines, or a lambda (what
        the names in it hold included, two levels)."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Lambda):
                return True
            if isinstance(n, cst.Name):
                for b in bindings(n, scope):
                    if b.kind in (Kind.DEF, Kind.CLASS):
                        return True
                    if (
                        b.kind is Kind.ASSIGN
                        and b.value is not None
                        and depth < 2
                        and self._defined_here(b.value, b.ctx.scope, depth + 1)
                    ):
                        return True
            elif isinstance(n, cst.Attribute):
                stack.append(n.value)
                continue
            stack.extend(children(n))
        return False

    def _holds_lambda(self, node: cst.CSTNode, scope: Scope, depth: int = 0) -> bool:
        """A lambda in the expression, or in what a name in it holds (two levels)."""
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, cst.Lambda):
                return True
            if isinstance(n, cst.Name) and depth < 2:
                for value in assigned_values(n, scope):
                    if self._holds_lambda(value, scope, depth + 1):
                        return True
            elif isinstance(n, cst.Attribute):
                stack.append(n.value)
                continue
            stack.extend(children(n))
        return False
