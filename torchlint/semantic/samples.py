"""What a Dataset's samples are made of and how a collate function handles them: text
only (names, lines, sentence pairs, which the default collate hands on as lists of
strings: nothing for `pin_memory` to pin, the tensors being built later), or collated by
padding and stacking only; files decoded or images augmented per sample (`Decoding`);
and data sets known to be large (an epoch of thousands of steps)."""

from __future__ import annotations

import re

import libcst as cst

from torchlint.semantic.external import Class
from torchlint.semantic.functions import Functions
from torchlint.semantic.scopes import Kind, Scope, assigned_once
from torchlint.semantic.syntax import dotted_name
from torchlint.semantic.values import Values
from torchlint.text.walk import descendants

# Methods that return a string when called on one.
STRING_METHODS = frozenset(
    {"strip", "lstrip", "rstrip", "lower", "upper", "casefold", "title", "capitalize"}
    | {"replace", "format", "decode"}
)
CSV_READERS = frozenset({"csv.reader"})
# Data sets of 100,000 samples or more (CelebA, ImageNet, COCO, LSUN, FFHQ, Places), by
# their torchvision class or by a name in the strings that build them.
LARGE_DATASETS = frozenset(
    f"torchvision.datasets.{name}"
    for name in ("CelebA", "ImageNet", "CocoDetection", "CocoCaptions", "LSUN", "Places365")
)
LARGE_NAMES = re.compile(r"celeba|imagenet|\bcoco|lsun|ffhq|places365|edges2shoes", re.I)
MAX_DEPTH = 3
# What a collate function may call and still only pad and stack the samples it is given.
PADDING = frozenset({
    "pad", "pad_sequence", "tensor", "as_tensor", "LongTensor", "stack", "cat", "unsqueeze",
    "squeeze", "arange", "zeros", "ones", "full", "new_full", "fill_", "view", "long",
    "int", "float", "size", "clone", "contiguous", "dict", "list", "tuple", "len", "max",
    "min", "sum", "range", "enumerate", "zip", "sorted", "append", "extend", "items",
    "keys", "values", "get", "isinstance", "default_collate", "default_data_collator",
})  # fmt: skip
# Collators that pad or stack (Hugging Face's, PyTorch's default).
PADDING_COLLATORS = frozenset({
    "torch.utils.data.default_collate", "torch.utils.data.dataloader.default_collate",
    "transformers.default_data_collator", "transformers.DataCollatorWithPadding",
    "transformers.data.data_collator.default_data_collator",
})  # fmt: skip


def text_samples(cls: Scope) -> bool:
    """`__getitem__` returns strings only: each value it returns (or each element of the
    tuple it returns) is `self.x[i]` of an attribute the class binds only to lists of
    text: comprehensions of string methods (`[x.strip() for x in f]`), of rows of a
    `csv.reader` (`[row[0] for row in rows]`), or of another such list."""
    getitem = cls.member("__getitem__")
    method = getitem.only(Kind.DEF) if getitem is not None else None
    if method is None or not isinstance(method.node, cst.FunctionDef):
        return False
    params = method.node.params.params
    if not params:
        return False
    self_name = params[0].name.value
    returns = [
        n
        for n in descendants(method.node.body)
        if isinstance(n, cst.Return) and n.value is not None
    ]
    if not returns:
        return False
    for ret in returns:
        assert ret.value is not None
        value = ret.value
        items = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        if not items or not all(_text_item(cls, self_name, item) for item in items):
            return False
    return True


def _text_item(cls: Scope, self_name: str, node: cst.BaseExpression) -> bool:
    """`self.x[i]` with every binding of `self.x` a list of text."""
    if not isinstance(node, cst.Subscript):
        return False
    return _text_list(cls, self_name, node.value, 0)


def _text_list(cls: Scope, self_name: str, node: cst.BaseExpression, depth: int) -> bool:
    if depth > MAX_DEPTH or not isinstance(node, cst.Attribute):
        return False
    if not (isinstance(node.value, cst.Name) and node.value.value == self_name):
        return False
    symbol = cls.attributes.get(node.attr.value)
    if symbol is None or not symbol.bindings:
        return False
    for binding in symbol.bindings:
        value = binding.value
        if binding.kind is not Kind.ASSIGN or not isinstance(value, cst.ListComp):
            return False
        targets = {
            target.value: comp.iter
            for comp in _fors(value.for_in)
            if isinstance(target := comp.target, cst.Name)
        }
        if not _text(value.elt, targets, binding.ctx.scope, cls, self_name, depth):
            return False
    return True


def _fors(comp: cst.CompFor) -> list[cst.CompFor]:
    found = [comp]
    while comp.inner_for_in is not None:
        comp = comp.inner_for_in
        found.append(comp)
    return found


def _text(
    node: cst.BaseExpression,
    targets: dict[str, cst.BaseExpression],
    scope: Scope,
    cls: Scope,
    self_name: str,
    depth: int,
) -> bool:
    """A comprehension's element is a string: a literal, `str(...)`, a string method of
    anything, a field of a CSV row, or an item of another text list of the class."""
    if isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Attribute):
            return func.attr.value in STRING_METHODS
        return scope.resolve(func) == "str"
    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name):
        source = targets.get(node.value.value)
        return source is not None and _csv_rows(source, scope, 0)
    if isinstance(node, cst.Name) and node.value in targets:
        return _text_list(cls, self_name, targets[node.value], depth + 1)
    return False


def _csv_rows(node: cst.BaseExpression, scope: Scope, depth: int) -> bool:
    """`csv.reader(f)`, `list(...)` of it, or a name bound once to one of these."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(node, cst.Call):
        qualname = scope.resolve(node.func)
        if qualname in CSV_READERS:
            return True
        return (
            qualname == "list"
            and len(node.args) == 1
            and _csv_rows(node.args[0].value, scope, depth + 1)
        )
    if isinstance(node, cst.Name):
        bound = assigned_once(node, scope)
        return (
            bound is not None
            and bound.value is not None
            and _csv_rows(bound.value, bound.ctx.scope, depth + 1)
        )
    return False


def pads(function: cst.FunctionDef) -> bool:
    """Every call in the function's body is one that pads or stacks (`PADDING`)."""
    for node in descendants(function.body):
        if isinstance(node, cst.Call):
            func = node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else None
            name = func.value if isinstance(func, cst.Name) else name
            if name not in PADDING:
                return False
    return True


def large_dataset(values: Values, call: cst.Call, scope: Scope) -> str | None:
    """The name of a data set of 100,000 samples or more a dataset construction reads: a
    torchvision class (`CelebA`), or a string among its arguments, as the file writes
    or defaults it (`ImageDataset("../data/%s" % opt.dataset_name)` with the option's
    default "img_align_celeba"), or the name of the class built (`CocoDataset`); None
    where nothing names one."""
    qualname = scope.resolve(call.func)
    if qualname in LARGE_DATASETS:
        return qualname.rpartition(".")[2]
    named = LARGE_NAMES.search(dotted_name(call.func) or "")  # `CocoDataset(...)`
    if named is not None:
        return named.group(0)
    return _named(values, [a.value for a in call.args], scope, 0)


def _named(values: Values, nodes: list[cst.BaseExpression], scope: Scope, depth: int) -> str | None:
    """A large data set's name in the strings of `nodes`, following a name bound once to
    what builds it (`traindir = os.path.join(args.data, "train")`, one level)."""
    for root in nodes:
        for node in descendants(root):  # the root first
            if not isinstance(node, (cst.SimpleString, cst.Name, cst.Attribute)):
                continue
            found = values.constant(node, scope)
            text = found.value if found is not None else None
            match = LARGE_NAMES.search(text) if isinstance(text, str) else None
            if match is not None:
                return match.group(0)
            bound = assigned_once(node, scope) if isinstance(node, cst.Name) else None
            if found is None and not depth and bound is not None and bound.value is not None:
                named = _named(values, [bound.value], bound.ctx.scope, depth + 1)
                if named is not None:
                    return named
    return None


# torchvision datasets that read and decode an image file (or an LMDB record) per sample;
# every torchaudio dataset loads an audio file per sample.
DECODING_DATASETS = frozenset({
    "ImageFolder", "DatasetFolder", "CocoDetection", "CocoCaptions", "VOCSegmentation",
    "VOCDetection", "SBDataset", "LSUN", "LSUNClass", "CelebA", "ImageNet", "Places365",
    "Cityscapes", "Flowers102", "Food101", "StanfordCars", "OxfordIIITPet", "Caltech101",
    "Caltech256", "INaturalist", "DTD", "FGVCAircraft", "Kitti", "WIDERFace", "LFWPeople",
    "LFWPairs", "SUN397", "Country211", "EuroSAT", "GTSRB", "Imagenette", "Kinetics",
    "UCF101", "HMDB51",
})  # fmt: skip
AUDIO_DATASETS = "torchaudio.datasets."
# Functions that read and decode an image or audio file.
DECODERS = frozenset({
    "PIL.Image.open", "cv2.imread", "cv2.imdecode", "imageio.imread", "imageio.v2.imread",
    "imageio.v3.imread", "skimage.io.imread", "matplotlib.pyplot.imread",
    "torchvision.io.read_image", "torchvision.io.decode_image", "torchvision.io.decode_jpeg",
    "torchvision.io.decode_png", "torchvision.io.read_video", "torchvision.io.image.read_image",
    "torchvision.datasets.folder.default_loader", "torchvision.datasets.folder.pil_loader",
    "torchaudio.load", "soundfile.read", "librosa.load", "scipy.io.wavfile.read",
})  # fmt: skip
# torchvision transforms that resample, warp or recolour every pixel of an image on the
# CPU (flips, crops of a fixed centre, ToTensor and Normalize are cheaper and not listed).
AUGMENTATIONS = frozenset({
    "Resize", "Scale", "RandomResizedCrop", "RandomSizedCrop", "RandomCrop", "ColorJitter",
    "RandomRotation", "RandomAffine", "RandomPerspective", "AutoAugment", "RandAugment",
    "TrivialAugmentWide", "AugMix", "GaussianBlur", "ElasticTransform", "RandomResize",
    "ScaleJitter", "RandomShortestSize",
})  # fmt: skip
# Parts of a dataset, whose samples are the dataset's.
PARTS = frozenset({
    "torch.utils.data.Subset", "torch.utils.data.dataset.Subset",
    "torch.utils.data.random_split", "torch.utils.data.dataset.random_split",
})  # fmt: skip


class Decoding:
    """What a dataset does per sample that needs CPU time: decode a file (a torchvision
    file dataset, a torchaudio dataset, a Dataset class whose `__getitem__` calls an
    image or audio decoder) or augment an image (`AUGMENTATIONS` in its transform)."""

    def __init__(self, functions: Functions, values: Values) -> None:
        self.functions = functions
        self.values = values

    def per_sample(
        self, node: cst.BaseExpression, scope: Scope, depth: int = 0
    ) -> tuple[str, bool] | None:
        """What the dataset expression (any value it may hold) decodes or augments per
        sample, said for a message, and whether it decodes files (True) or only augments
        images already in memory (False); a decoding origin is preferred; None if none."""
        augmented: tuple[str, bool] | None = None
        for value, where in self.values.origins(node, scope):
            if not isinstance(value, cst.Call):
                continue
            qualname = where.resolve(value.func)
            if qualname in PARTS and value.args and depth < MAX_DEPTH:
                found = self.per_sample(value.args[0].value, where, depth + 1)
            else:
                found = self._built(value, where, qualname)
            if found is not None and found[1]:
                return found
            augmented = augmented or found
        return augmented

    def _built(self, call: cst.Call, scope: Scope, qualname: str | None) -> tuple[str, bool] | None:
        name = (qualname or "").rpartition(".")[2]
        if qualname is not None and (
            (qualname.startswith("torchvision.datasets.") and name in DECODING_DATASETS)
            or qualname.startswith(AUDIO_DATASETS)
        ):
            return f"`{name}` decodes a file per sample", True
        exported = self.functions.export(call.func, scope) if qualname is not None else None
        if isinstance(exported, Class) and exported.dataset and exported.dataset.decodes:
            return f"`{name}` decodes with `{exported.dataset.decodes}`", True
        cls = self.functions.class_scope(call.func, scope)
        decoder = self.decoder(cls) if cls is not None else None
        if decoder is not None:
            assert cls is not None and isinstance(cls.node, cst.ClassDef)
            return f"`{cls.node.name.value}` decodes with `{decoder}`", True
        for arg in call.args:
            if arg.keyword is not None and "transform" in arg.keyword.value:
                augmentation = self.augmentation(arg.value, scope)
                if augmentation is not None:
                    return f"its transform runs `{augmentation}`", False
        return None

    def decoder(self, cls: Scope, depth: int = 0) -> str | None:
        """The decoder a Dataset class of this file reads each sample with: the torchvision
        file dataset it derives from (`ImageFolder`), or a `DECODERS` call in its
        `__getitem__`, in a method or function of the file that calls (two levels), or
        through an attribute bound to one (`self.loader = default_loader`); None if none."""
        node = cls.node
        if not isinstance(node, cst.ClassDef) or cls.parent is None or depth > MAX_DEPTH:
            return None
        for base in node.bases:
            qualname = cls.parent.resolve(base.value) or ""
            if qualname.startswith("torchvision.datasets."):
                name = qualname.rpartition(".")[2]
                if name in DECODING_DATASETS:
                    return name
        for base_scope in cls.bases:
            found = self.decoder(base_scope, depth + 1)
            if found is not None:
                return found
        getitem = cls.member("__getitem__")
        method = getitem.only(Kind.DEF) if getitem is not None else None
        if method is None or not isinstance(method.node, cst.FunctionDef):
            return None
        return self._calls_decoder(method.node, 0)

    def _calls_decoder(self, function: cst.FunctionDef, depth: int) -> str | None:
        scope = self.functions.scope_of(function)
        for node in descendants(function.body):
            if isinstance(node, cst.Call):
                found = self._decoder_named(node.func, scope, depth)
                if found is not None:
                    return found
        return None

    def _decoder_named(self, func: cst.BaseExpression, scope: Scope, depth: int) -> str | None:
        qualname = scope.resolve(func)
        if qualname is not None:
            return qualname if qualname in DECODERS else None
        if depth >= 2:
            return None
        target = self.functions.definition(func, scope)
        if target is not None:
            if isinstance(target.node, cst.FunctionDef):
                return self._calls_decoder(target.node, depth + 1)
            return None
        symbol = scope.lookup_expr(func)  # `self.loader(path)`, `self.loader = pil_loader`
        for binding in symbol.bindings if symbol is not None else ():
            value = binding.value
            if isinstance(value, (cst.Name, cst.Attribute)) and value is not func:
                found = self._decoder_named(value, binding.ctx.scope, depth + 1)
                if found is not None:
                    return found
        return None

    def augmentation(self, node: cst.BaseExpression, scope: Scope, depth: int = 0) -> str | None:
        """The first torchvision `AUGMENTATIONS` transform a transform expression builds,
        through `Compose([...])`, `RandomApply`, lists and the names that hold them."""
        stack: list[tuple[cst.BaseExpression, Scope]] = [(node, scope)]
        while stack:
            value, where = stack.pop()
            if isinstance(value, cst.Call):
                name = (where.resolve(value.func) or "").rpartition(".")
                if name[0].startswith("torchvision.transforms") and name[2] in AUGMENTATIONS:
                    return name[2]
                stack += [(a.value, where) for a in reversed(value.args)]
            elif isinstance(value, (cst.List, cst.Tuple)):
                stack += [(e.value, where) for e in reversed(value.elements)]
            elif isinstance(value, (cst.Name, cst.Attribute)) and depth < MAX_DEPTH:
                for origin, inner in self.values.origins(value, where):
                    if origin is not value:
                        found = self.augmentation(origin, inner, depth + 1)
                        if found is not None:
                            return found
        return None
