"""What a network is like, where it can be read from the code: how many parameters it
has (from the sizes its layers are built with, or the size a pretrained model's name
says; `toy`: too few to keep a GPU busy), whether it is a well-known architecture, the
precision it is loaded in (`torch_dtype=torch.bfloat16`, 4/8-bit quantization), whether
it takes sequences first (recurrent and transformer layers without `batch_first=True`),
which `DataParallel` would split along time instead of the batch, and whether its
`forward` loops over time steps in Python."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import libcst as cst

from torchlint.semantic.functions import Functions
from torchlint.semantic.lattice import ModelKind
from torchlint.semantic.models import ZOO_PREFIXES, Model, Models, ModelSite
from torchlint.semantic.scopes import CallSite, Kind, Scope
from torchlint.semantic.syntax import MISSING, argument, bool_value, dotted_name, keyword
from torchlint.semantic.values import Values
from torchlint.text.walk import children, descendants

MAX_DEPTH = 6
# Parameters below which a network is a toy: its kernels are too small to keep a GPU
# busy, so launch overhead, not arithmetic, bounds a step.
TOY = 1_000_000
Count = Callable[[list[int | None], cst.Call], int | None]

RECURRENT = {"LSTM": 4, "GRU": 3, "RNN": 1}
SMALL_PERCEPTRON = 10_000
LINEAR = "torch.nn.Linear"
PERCEPTRON_LAYERS = frozenset(
    {"Linear", "Sequential", "ModuleList", "Identity", "Flatten", "Dropout", "BatchNorm1d"}
    | {"ReLU", "LeakyReLU", "ELU", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax"}
)
SEQUENCE_FIRST = (
    "torch.nn.LSTM",
    "torch.nn.GRU",
    "torch.nn.RNN",
    "torch.nn.Transformer",
    "torch.nn.TransformerEncoder",
    "torch.nn.TransformerDecoder",
    "torch.nn.TransformerEncoderLayer",
    "torch.nn.TransformerDecoderLayer",
    "torch.nn.MultiheadAttention",
)
CONTAINERS = ("torch.nn.Sequential", "torch.nn.ModuleList")
CONVOLUTIONS = frozenset(
    f"{prefix}{kind}{dims}d"
    for prefix in ("", "Lazy")
    for kind in ("Conv", "ConvTranspose")
    for dims in (1, 2, 3)
)
# torchvision architectures built mostly of 2-d convolutions (the vision transformers,
# swin_* and maxvit_*, are not); the detection, segmentation and video models have
# convolutional backbones.
CONVOLUTIONAL_ZOO = (
    "alexnet", "convnext", "densenet", "efficientnet", "googlenet", "inception", "mnasnet",
    "mobilenet", "regnet", "resnet", "resnext", "shufflenet", "squeezenet", "vgg",
    "wide_resnet",
)  # fmt: skip
# The size a model id says: "Llama-3.1-8B", "opt-125m", "Qwen2.5-0.5B" (not "gpt2", "t5").
SIZE_IN_NAME = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)([bm])(?![a-z])", re.IGNORECASE)
# Families whose every released checkpoint has at least a billion parameters (a size in
# the name, "TinyLlama-1.1B", wins).
BILLION_FAMILIES = ("llama", "mistral", "mixtral", "falcon", "gpt-j", "gptj", "gpt-neox", "vicuna")
BILLION = 1_000_000_000
# What `from_pretrained` loads that is not a network.
NOT_NETWORKS = ("Tokenizer", "Processor", "Config", "FeatureExtractor", "ImageProcessor")
# `from_pretrained(..., torch_dtype=...)` below float32 ("auto": the checkpoint's own dtype,
# half precision for every large model on the Hub).
REDUCED_DTYPES = {
    "torch.float16": "float16",
    "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
}
REDUCED_DTYPE_NAMES = ("float16", "half", "bfloat16", "auto")
QUANTIZING = ("load_in_8bit", "load_in_4bit")


def _conv(dims: int) -> Count:
    def count(sizes: list[int | None], call: cst.Call) -> int | None:
        cin, cout, kernel = sizes[:3]
        if cin is None or cout is None or kernel is None:
            return None
        weights: int = cin * cout * kernel**dims  # (int ** int is typed Any: may be a float)
        return weights + cout

    return count


def _recurrent(gates: int) -> Count:
    def count(sizes: list[int | None], call: cst.Call) -> int | None:
        inputs, hidden = sizes[:2]
        layers = sizes[2] if len(sizes) > 2 and sizes[2] is not None else 1
        if inputs is None or hidden is None:
            return None
        directions = 2 if bool_value(keyword(call, "bidirectional")) else 1
        first = gates * (inputs * hidden + hidden * hidden + 2 * hidden)
        rest = gates * (directions * hidden * hidden + hidden * hidden + 2 * hidden)
        return directions * (first + (layers - 1) * rest)

    return count


def _pair(sizes: list[int | None], call: cst.Call) -> int | None:  # Linear, Embedding
    a, b = sizes[:2]
    return a * b + (b if "Linear" in _name(call) else 0) if a and b else None


def _norm(sizes: list[int | None], call: cst.Call) -> int | None:
    return 2 * sizes[0] if sizes and sizes[0] is not None else None


def _name(call: cst.Call) -> str:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")


LAYERS: dict[str, Count] = {
    "Linear": _pair,
    "Embedding": _pair,
    "EmbeddingBag": _pair,
    "Conv1d": _conv(1),
    "Conv2d": _conv(2),
    "Conv3d": _conv(3),
    "ConvTranspose1d": _conv(1),
    "ConvTranspose2d": _conv(2),
    "ConvTranspose3d": _conv(3),
    "BatchNorm1d": _norm,
    "BatchNorm2d": _norm,
    "BatchNorm3d": _norm,
    "LayerNorm": _norm,
    "InstanceNorm2d": _norm,
    **{name: _recurrent(gates) for name, gates in RECURRENT.items()},
}
POSITIONS = {  # the size arguments of each layer, by name then position
    "Linear": ("in_features", "out_features"),
    "Embedding": ("num_embeddings", "embedding_dim"),
    "EmbeddingBag": ("num_embeddings", "embedding_dim"),
    "LSTM": ("input_size", "hidden_size", "num_layers"),
    "GRU": ("input_size", "hidden_size", "num_layers"),
    "RNN": ("input_size", "hidden_size", "num_layers"),
    "LayerNorm": ("normalized_shape",),
}
CONV = ("in_channels", "out_channels", "kernel_size")


class Networks:
    def __init__(self, functions: Functions, values: Values, models: Models) -> None:
        self.functions = functions
        self.values = values
        self.models = models
        self._classes: dict[int, int | None] = {}
        self._calls_in: dict[int, list[CallSite]] | None = None  # id(class/def) -> calls
        self._layers: dict[int, frozenset[str]] = {}

    def layers(self, site: Model) -> frozenset[str]:
        """The `torch.nn` layers the network is built from (`"Conv2d"`, `"Linear"`), as
        far as the file shows them: the layers its construction passes, those a class of
        this file (its bases, the classes and functions it calls, nested functions
        included) builds, and those of the models passed to its construction. A model
        from elsewhere shows none."""
        return self._site_layers(site, 0)

    def _site_layers(self, site: Model, depth: int) -> frozenset[str]:
        """The site's own layers, and those of the models its construction is given
        (`Seq2Seq(encoder, decoder)`)."""
        if not isinstance(site, ModelSite):  # built elsewhere
            return site.external.layers if site.external is not None else frozenset()
        construction = site.construction
        found = set(self._layers_in(construction.node, construction.scope, depth))
        if depth < MAX_DEPTH:
            for arg in construction.node.args:
                given = self.models.of(arg.value, construction.scope)
                if given is not None and given is not site:
                    found |= self._site_layers(given, depth + 1)
        return frozenset(found)

    def convolutional(self, site: Model) -> bool:
        """The network convolves: a convolution layer in `layers`, or a torchvision
        architecture built of convolutions."""
        qualname = (site.construction.qualname or "") if isinstance(site, ModelSite) else ""
        if qualname.startswith("torchvision.models."):
            name = qualname.rsplit(".", 1)[-1]
            return name.startswith(CONVOLUTIONAL_ZOO) or qualname.startswith(
                ("torchvision.models.detection.", "torchvision.models.segmentation.")
            )
        return not CONVOLUTIONS.isdisjoint(self.layers(site))

    def _layers_in(self, node: cst.CSTNode, scope: Scope, depth: int) -> frozenset[str]:
        """The torch.nn layers built by the calls in `node`, following calls of this
        file's classes and functions."""
        found: set[str] = set()
        for call in descendants(node):
            if isinstance(call, cst.Call):
                found |= self._layers_of(call, scope, depth)
        return frozenset(found)

    def _layers_of(self, call: cst.Call, scope: Scope, depth: int) -> frozenset[str]:
        qualname = scope.resolve(call.func)
        if qualname is not None:
            if qualname.startswith("torch.nn.") and not qualname.startswith("torch.nn.functional"):
                return frozenset({qualname.rsplit(".", 1)[-1]})
            network = self.models.exported(call, scope)  # another file of the project
            return network.layers if network is not None else frozenset()
        target = self.functions.definition(call.func, scope)
        if target is None or not isinstance(target.node, (cst.ClassDef, cst.FunctionDef)):
            return frozenset()
        return self._layers_of_definition(target.node, depth + 1)

    def _layers_of_definition(
        self, node: cst.ClassDef | cst.FunctionDef, depth: int
    ) -> frozenset[str]:
        """What the calls in a class (its bases included) or a function build."""
        key = id(node)
        if key in self._layers:
            return self._layers[key]
        if depth > MAX_DEPTH:
            return frozenset()
        self._layers[key] = frozenset()  # while computing (recursion)
        if self._calls_in is None:
            self._calls_in = {}
            for c in self.functions.facts.calls:
                for owner in {id(c.ctx.class_), id(c.ctx.function)}:
                    self._calls_in.setdefault(owner, []).append(c)
        found: set[str] = set()
        for c in self._calls_in.get(key, ()):
            found |= self._layers_of(c.node, c.scope, depth)
        if isinstance(node, cst.ClassDef):
            for base in self.functions.scope_of(node).bases:
                assert isinstance(base.node, cst.ClassDef)
                found |= self._layers_of_definition(base.node, depth + 1)
        self._layers[key] = frozenset(found)
        return self._layers[key]

    def class_layers(self, cls: Scope) -> frozenset[str]:
        """The torch.nn layers a network class of this file builds."""
        assert isinstance(cls.node, cst.ClassDef)
        return self._layers_of_definition(cls.node, 0)

    def well_known(self, site: Model) -> bool:
        """Built by a model zoo (torchvision, timm, torch.hub, `from_pretrained`)."""
        if not isinstance(site, ModelSite):
            return False
        qualname = site.construction.qualname or ""
        return qualname.startswith(ZOO_PREFIXES) or (
            qualname.startswith("transformers.") and qualname.endswith(".from_pretrained")
        )

    def pretrained_id(self, site: Model) -> str | None:
        """The model id a Hugging Face `from_pretrained` (or `from_config` of a
        `from_pretrained` config) network loads, where the file shows it (a literal, a
        constant, an option's default)."""
        if not isinstance(site, ModelSite):
            return None
        call, scope = site.construction.node, site.construction.scope
        if not self.pretrained_transformer(call, scope):
            return None
        return self._model_id(call, scope, 0)

    def _model_id(self, call: cst.Call, scope: Scope, depth: int) -> str | None:
        first = argument(call, "pretrained_model_name_or_path", ("pretrained_model_name_or_path",))
        if first is MISSING:
            first = argument(call, "config", ("config",))
        if first is MISSING or depth > 2:
            return None
        for value, where in self.values.origins(first, scope):
            if isinstance(value, cst.Call):  # AutoConfig.from_pretrained(id)
                found = self._model_id(value, where, depth + 1)
                if found is not None:
                    return found
                continue
            constant = self.values.constant(value, where)
            if constant is not None and isinstance(constant.value, str):
                return constant.value
        return None

    def pretrained_transformer(self, call: cst.Call, scope: Scope) -> bool:
        """`call` builds a Hugging Face pretrained network: `from_pretrained` or
        `from_config` of a transformers model class (not a tokenizer or config)."""
        qualname = scope.resolve(call.func) or ""
        return (
            qualname.startswith("transformers.")
            and qualname.endswith((".from_pretrained", ".from_config"))
            and not any(n in qualname for n in NOT_NETWORKS)
        )

    def estimated_parameters(self, site: Model) -> int | None:
        """How many parameters the network has: counted from its layers, else the size its
        pretrained model id says ("7b", "125m"), else at least a billion for a family
        released only at that size ("llama"); None when nothing says."""
        counted = self.parameters(site)
        if counted is not None:
            return counted
        name = self.pretrained_id(site)
        return size_in_name(name) if name is not None else None

    def loaded_precision(self, site: Model) -> str | None:
        """The precision a network is built or loaded in, where below float32:
        "float16"/"bfloat16"/"auto" (`torch_dtype=`/`dtype=`, read through names and
        options) or "quantized" (`load_in_8bit/4bit=True`, `quantization_config=`)."""
        if not isinstance(site, ModelSite):
            return None
        call, scope = site.construction.node, site.construction.scope
        for arg in call.args:
            name = arg.keyword.value if arg.keyword is not None else None
            if name == "quantization_config" or (
                name in QUANTIZING and bool_value(arg.value) is not False
            ):
                return "quantized"
            if name in ("torch_dtype", "dtype"):
                found = self.dtype(arg.value, scope)
                if found is not None:
                    return found
        return None

    def dtype(self, node: cst.BaseExpression, scope: Scope) -> str | None:
        """The reduced floating-point dtype an expression names ("float16", "bfloat16",
        "auto"), through names, options and `getattr(torch, "bfloat16")`; None for float32
        or what cannot be read."""
        for value, where in self.values.origins(node, scope):
            qualname = where.resolve(value) if isinstance(value, cst.Attribute) else None
            if qualname in REDUCED_DTYPES:
                return REDUCED_DTYPES[qualname]
            if isinstance(value, cst.Call) and dotted_name(value.func) == "getattr":
                if len(value.args) < 2:
                    continue
                value = value.args[1].value  # getattr(torch, "bfloat16")
            constant = self.values.constant(value, where)
            text = constant.value if constant is not None else None
            if isinstance(text, str) and text.removeprefix("torch.") in REDUCED_DTYPE_NAMES:
                return "float16" if text.endswith("half") else text.removeprefix("torch.")
        return None

    def parameters(self, site: Model) -> int | None:
        """How many parameters the network has, where every size it is built with can be
        read; None otherwise."""
        if not isinstance(site, ModelSite):
            return site.external.parameters if site.external is not None else None
        return self._count(site.construction.node, site.construction.scope, 0)

    def small_perceptron(self, site: Model) -> bool:
        """A multilayer perceptron of fewer than `SMALL_PERCEPTRON` counted parameters
        (`Linear` layers and parameter-free ones only): a step takes microseconds on the
        CPU, where a GPU would add launch and copy overheads and gain nothing."""
        count = self.parameters(site)
        layers = self.layers(site)
        return (
            count is not None
            and count < SMALL_PERCEPTRON
            and "Linear" in layers
            and layers <= PERCEPTRON_LAYERS
        )

    def widest_linear(self, site: Model) -> int | None:
        """The largest size (`in_features`/`out_features`) of the `Linear` layers a network
        class of this file assigns to `self`, read as constants (through `__init__`'s
        arguments); None where one cannot be read, or there is none."""
        if not isinstance(site, ModelSite):
            return None
        construction = site.construction
        cls = self.functions.class_scope(construction.node.func, construction.scope)
        sizes: list[int | None] = []
        for symbol in cls.attributes.values() if cls is not None else ():
            for b in symbol.bindings:
                value = b.value
                if isinstance(value, cst.Call) and b.ctx.scope.resolve(value.func) == LINEAR:
                    sizes += [self._int(a.value, b.ctx.scope) for a in value.args[:2]]
                    sizes += [None] * (2 - len(value.args[:2]))
        known = [size for size in sizes if size is not None]
        return max(known) if known and len(known) == len(sizes) else None

    def class_parameters(self, cls: Scope) -> int | None:
        """How many parameters an instance of a network class of this file has."""
        return self._class(cls, 0)

    def _count(self, node: cst.BaseExpression, scope: Scope, depth: int) -> int | None:
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, cst.Call):
            qualname = scope.resolve(node.func)
            if qualname is not None:
                network = self.models.exported(node, scope)
                if network is not None:  # a class or factory of another file
                    return network.parameters
                return self._library(qualname, node, scope, depth)
            cls = self.functions.class_scope(node.func, scope)
            return self._class(cls, depth) if cls is not None else None
        site = self.models.of(node, scope)
        if site is None:
            return None
        if not isinstance(site, ModelSite):
            return site.external.parameters if site.external is not None else None
        return self._count(site.construction.node, site.construction.scope, depth + 1)

    def _library(self, qualname: str, call: cst.Call, scope: Scope, depth: int) -> int | None:
        if not qualname.startswith("torch.nn."):
            return None
        name = qualname.rsplit(".", 1)[-1]
        if qualname in CONTAINERS:
            items: list[cst.BaseExpression] = []
            for arg in call.args:
                value = arg.value
                if isinstance(value, (cst.List, cst.Tuple)) and not arg.star:
                    items.extend(e.value for e in value.elements)
                elif arg.star:
                    return None  # `*layers` built elsewhere
                else:
                    items.append(value)
            counts = [self._count(v, scope, depth + 1) for v in items]
            return sum(c for c in counts if c is not None) if None not in counts else None
        count = LAYERS.get(name)
        if count is None:
            kind = self.models.kind_of_construction(call, scope)
            return 0 if kind is not None and kind is not ModelKind.NETWORK else None
        params = POSITIONS.get(name, CONV)
        sizes = [self._int(argument(call, p, params), scope) for p in params]
        return count(sizes, call)

    def _int(self, node: cst.BaseExpression, scope: Scope) -> int | None:
        if node is MISSING:
            return None
        if isinstance(node, (cst.Tuple, cst.List)):  # kernel (3, 3): the first
            return self._int(node.elements[0].value, scope) if node.elements else None
        if isinstance(node, cst.BinaryOperation):
            left, right = self._int(node.left, scope), self._int(node.right, scope)
            if left is None or right is None:
                return None
            operator = type(node.operator).__name__
            ops = {"Add": left + right, "Multiply": left * right, "Subtract": left - right}
            if operator == "FloorDivide" and right:
                return left // right
            return ops.get(operator)
        found = self.values.constant(node, scope)
        value = found.value if found is not None else None
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def _class(self, cls: Scope, depth: int) -> int | None:
        """A network class of this file: the layers its methods assign to `self`."""
        key = id(cls)
        if key in self._classes:
            return self._classes[key]
        self._classes[key] = None  # while computing
        assert isinstance(cls.node, cst.ClassDef) and cls.parent is not None
        if any(cls.parent.resolve(b.value) in CONTAINERS for b in cls.node.bases):
            return None  # an `nn.ModuleList` subclass: its items are added where it is used
        total = 0
        for base in cls.bases:
            inherited = self._class(base, depth + 1)
            if inherited is None:
                return None
            total += inherited
        for symbol in cls.attributes.values():
            for b in symbol.bindings:
                if b.kind is not Kind.ASSIGN or b.value is None:
                    continue
                if self._sliced_network(b.value, b.ctx.scope):
                    return None  # `vgg16(...).features[:23]`: a part of a network
                if not isinstance(b.value, (cst.Call, cst.Name, cst.Attribute)):
                    continue  # sizes, flags, lists of constants
                if not isinstance(b.value, cst.Call) and self._plain(b.value, b.ctx.scope):
                    continue  # `self.lr = lr`: a number or a string the file shows
                if isinstance(b.value, cst.Call) and self._not_a_module(b.value, b.ctx.scope):
                    continue
                count = self._count(b.value, b.ctx.scope, depth + 1)
                if count is None:
                    return None
                total += count
        self._classes[key] = total
        return total

    def _sliced_network(self, node: cst.BaseExpression, scope: Scope) -> bool:
        """An item or slice of a call's result or of a model (`vgg16(...).features[:23]`,
        `backbone.layers[0]`), whose size the file does not show."""
        base = node.value if isinstance(node, cst.Subscript) else None
        while isinstance(base, (cst.Attribute, cst.Subscript)) and not self.models.of(base, scope):
            base = base.value
        found = base is not None and self.models.of(base, scope) is not None
        return found or isinstance(base, cst.Call)

    def _plain(self, node: cst.BaseExpression, scope: Scope) -> bool:
        """A name or attribute that holds a constant (a number, a string, a flag), not a
        module."""
        found = self.values.constant(node, scope)
        plain = found is not None and isinstance(found.value, (int, float, str))
        return plain and self.models.of(node, scope) is None

    def _not_a_module(self, call: cst.Call, scope: Scope) -> bool:
        """A call that builds something else than a module (a tensor, a number)."""
        qualname = scope.resolve(call.func) or ""
        if qualname.startswith("torch.nn."):
            return False
        return qualname.startswith("torch.") or qualname in ("int", "float", "len", "range")

    def sequence_first(self, site: Model) -> bool:
        """The network holds a recurrent or transformer layer that takes (sequence, batch,
        ...) inputs: one built without `batch_first=True`."""
        if not isinstance(site, ModelSite):
            return site.external is not None and site.external.sequence_first
        return self._sequence_first(site.construction.node, site.construction.scope, 0)

    def _sequence_first(self, node: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        if depth > MAX_DEPTH or not isinstance(node, cst.Call):
            site = self.models.of(node, scope) if depth <= MAX_DEPTH else None
            if not isinstance(site, ModelSite):
                return site is not None and self.sequence_first(site)
            return self._sequence_first(site.construction.node, site.construction.scope, depth + 1)
        qualname = scope.resolve(node.func)
        if qualname in SEQUENCE_FIRST:
            return bool_value(keyword(node, "batch_first")) is not True
        if qualname in CONTAINERS:
            return any(self._sequence_first(a.value, scope, depth + 1) for a in node.args)
        network = self.models.exported(node, scope) if qualname is not None else None
        if network is not None:  # a class or factory of another file
            return network.sequence_first
        cls = self.functions.class_scope(node.func, scope)
        return cls is not None and self.class_sequence_first(cls, depth)

    def class_sequence_first(self, cls: Scope, depth: int = 0) -> bool:
        """A network class of this file holds a sequence-first layer."""
        return any(
            self._sequence_first(b.value, b.ctx.scope, depth + 1)
            for c in [cls, *cls.bases]
            for symbol in c.attributes.values()
            for b in symbol.bindings
            if b.value is not None
        )

    def steps_over_input(self, site: Model) -> bool:
        """The network's class (of this file) runs a Python loop in `forward` over a
        length read from its inputs (`for t in range(1, trg.shape[0])`, `range(max_len)`
        with `max_len` a parameter): a decoder stepping through time, one small kernel
        launch per step, which `torch.compile` unrolls for each new length."""
        if not isinstance(site, ModelSite):
            return False
        construction = site.construction
        cls = self.functions.class_scope(construction.node.func, construction.scope)
        symbol = cls.member("forward") if cls is not None else None
        forward = symbol.only(Kind.DEF) if symbol is not None else None
        if forward is None or not isinstance(forward.node, cst.FunctionDef):
            return False
        scope = self.functions.scope_of(forward.node)
        for loop in self.functions.facts.loops:
            it = loop.node.iter if isinstance(loop.node, cst.For) else None
            if loop.ctx.function is not forward.node or not isinstance(it, cst.Call):
                continue
            if scope.resolve(it.func) == "range" and any(
                _reads_input(a.value, scope, 0) for a in it.args
            ):
                return True
        return False


def _reads_input(node: cst.CSTNode, scope: Scope, depth: int) -> bool:
    """`node` reads a parameter of the function `scope` is (not its instance), directly
    or through names the function binds from one (`trg_len = trg.shape[0]`)."""
    if isinstance(node, cst.Attribute):
        return _reads_input(node.value, scope, depth)
    if not isinstance(node, cst.Name):
        return any(_reads_input(c, scope, depth) for c in children(node))
    symbol = scope.symbols.get(node.value)
    if symbol is None or node.value == scope.self_name or depth > MAX_DEPTH:
        return False
    for b in symbol.bindings:
        if b.kind is Kind.PARAM:
            return True
        value = b.value if b.value is not None else b.source
        if b.kind is Kind.ASSIGN and value is not None and _reads_input(value, scope, depth + 1):
            return True
    return False


def toy(counts: Iterable[int | None]) -> bool:
    """Networks of known size that together hold fewer than `TOY` parameters."""
    found = list(counts)
    return bool(found) and None not in found and sum(c for c in found if c is not None) < TOY


def size_in_name(name: str) -> int | None:
    """The parameter count a model id says: its size token ("Llama-2-7b", "opt-125m"),
    else a billion for a family released only at that size or more."""
    sizes = [
        float(number) * (BILLION if unit.lower() == "b" else 1_000_000)
        for number, unit in SIZE_IN_NAME.findall(name)
    ]
    if sizes:
        return int(max(sizes))
    return BILLION if any(f in name.lower() for f in BILLION_FAMILIES) else None


def millions(count: int) -> str:
    return f"{count / 1e6:.1f}M" if count < 1e9 else f"{count / 1e9:.1f}B"
