"""One model identity: which values are `nn.Module` instances, what kind (a network with
parameters, a loss, a parameter-free layer), and every name, attribute and parameter
that holds each of them (through `.to()`, `DataParallel(...)`, helpers that build one)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.external import Class, Function
from torchlint.semantic.functions import Functions, wrapped_module
from torchlint.semantic.lattice import ModelKind
from torchlint.semantic.portable import Network
from torchlint.semantic.scopes import Binding, CallSite, Kind, Loop, Scope, Symbol
from torchlint.semantic.syntax import MODULE_WRAPPERS
from torchlint.semantic.values import Values
from torchlint.text.walk import descendants

MAX_DEPTH = 4


# torch.nn layers without parameters (losses are recognised by their name).
STATELESS_LAYERS = frozenset({
    "Identity", "Flatten", "Unflatten", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
    "AlphaDropout", "FeatureAlphaDropout", "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU",
    "GELU", "SiLU", "Mish", "Sigmoid", "Tanh", "Hardtanh", "Hardswish", "Hardsigmoid",
    "Hardshrink", "Softshrink", "Tanhshrink", "Softplus", "Softsign", "Softmax", "Softmax2d",
    "LogSoftmax", "Softmin", "LogSigmoid", "Threshold", "GLU", "MaxPool1d", "MaxPool2d",
    "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "LPPool1d", "LPPool2d", "FractionalMaxPool2d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
    "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle",
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "ChannelShuffle", "CosineSimilarity",
    "PairwiseDistance", "Fold", "Unfold",
})  # fmt: skip
NOT_MODULES = frozenset({"Parameter", "ParameterList", "ParameterDict", "Module", "Buffer"})
PARALLEL_WRAPPERS = ("torch.nn.DataParallel", "torch.nn.parallel.DistributedDataParallel")
ZOO_PREFIXES = ("torchvision.models.", "timm.create_model", "torch.hub.load")
# A module of networks looked up by name (`models.__dict__[args.arch]()`,
# `getattr(models, name)()`): torchvision's zoo, or an imported package so named.
ZOO_MODULES = frozenset({"models", "model", "networks", "nets", "archs", "backbones"})
# Pretrained networks loaded by other libraries than transformers: diffusers' model
# classes (`UNet2DConditionModel`, `AutoencoderKL`; not its pipelines or schedulers) and
# PEFT's `AutoPeftModelForCausalLM`-style loaders (a base model with its adapter).
DIFFUSERS_MODELS = re.compile(r"diffusers\.(?:\w+\.)*(?:\w+Model|Autoencoder\w*)\.from_pretrained$")
PEFT_LOADERS = re.compile(r"peft\.(?:\w+\.)*AutoPeftModel\w*\.from_pretrained$")
LOSS_BASES = ("torch.nn.modules.loss._Loss", "torch.nn.modules.loss._WeightedLoss")


@dataclass(eq=False)
class Model:
    """An nn.Module instance the file holds, and where it goes: one built here
    (`ModelSite`), or one built elsewhere: passed in by another file of the project,
    loaded whole from a checkpoint, or presumed from its use (`external` says which)."""

    binding: Binding  # the assignment that first holds it (for one passed in: the parameter)
    kind: ModelKind
    symbols: list[Symbol] = field(default_factory=list)  # every name/attribute holding it
    moves: list[CallSite] = field(default_factory=list)  # `.to(...)`, `.cuda()` on it
    wrappers: list[CallSite] = field(default_factory=list)  # DataParallel(...), DDP(...)
    # What the project says of it: a model passed in, or one built here from a class or
    # factory of another file (its layers, size...).
    external: Network | None = None

    @property
    def name(self) -> str:
        return self.binding.symbol.name

    @property
    def symbol(self) -> Symbol:
        return self.binding.symbol

    @property
    def is_network(self) -> bool:
        return self.kind is ModelKind.NETWORK


@dataclass(eq=False)
class ModelSite(Model):
    """An nn.Module instance built in this file."""

    construction: CallSite = field(kw_only=True)
    index: int = field(kw_only=True)  # its rank among the models built in the file


class Models:
    def __init__(self, facts: Facts, functions: Functions, values: Values) -> None:
        self.facts = facts
        self.functions = functions
        self.values = values
        self.sites: list[ModelSite] = []
        self.passed: list[Model] = []  # models built elsewhere (see `Model`)
        self._by_symbol: dict[int, Model | None] = {}
        self._by_call: dict[int, ModelSite] = {}
        self._classes: dict[int, ModelKind | None] = {}
        # (id(def), tuple element or None) -> the model it returns
        self._returns: dict[tuple[int, int | None], Model | None] = {}
        self._linked = False  # parameters are followed once every binding is linked
        self._link()

    # -- what builds a module ----------------------------------------------------------

    def kind_of_construction(self, call: cst.Call, scope: Scope) -> ModelKind | None:
        """What `call` builds, when it builds an nn.Module."""
        qualname = scope.resolve(call.func)
        if qualname is None and _zoo_lookup(call.func, scope):
            return ModelKind.NETWORK
        if qualname is not None:
            found = _library_kind(qualname)
            if found is None and (network := self.exported(call, scope)) is not None:
                found = network.kind
            return found
        cls = self.functions.class_scope(call.func, scope)
        return self.class_kind(cls) if cls is not None else self._factory_kind(call, scope)

    def _factory_kind(self, call: cst.Call, scope: Scope, depth: int = 0) -> ModelKind | None:
        """What a function of this file builds and returns as it builds it, a factory
        (`def ResNet18(): return ResNet(BasicBlock, [2, 2, 2, 2])`): the kind every
        construction it returns has."""
        target = self.functions.definition(call.func, scope)
        if target is None or target.kind is not Kind.DEF or depth > MAX_DEPTH:
            return None
        assert isinstance(target.node, cst.FunctionDef)
        inner = self.functions.scope_of(target.node)
        kinds = set()
        for value in self.functions.returns(target.node):
            if not isinstance(value, cst.Call):
                return None  # a name or an expression: `_returned` follows those
            qualname = inner.resolve(value.func)
            if qualname is not None:
                kind = self.kind_of_construction(value, inner)
            else:
                cls = self.functions.class_scope(value.func, inner)
                kind = (
                    self.class_kind(cls)
                    if cls is not None
                    else self._factory_kind(value, inner, depth + 1)
                )
            kinds.add(kind)
        return kinds.pop() if len(kinds) == 1 else None

    def exported(self, call: cst.Call, scope: Scope) -> Network | None:
        """The module a class or factory of another file of the project builds."""
        found = self.functions.export(call.func, scope)
        if isinstance(found, Class):
            return found.network()
        if isinstance(found, Function) and found.returns is not None:
            return found.returns.network
        return None

    def class_kind(self, cls: Scope, _depth: int = 0) -> ModelKind | None:
        """What an instance of a class of this file is, when it is an nn.Module."""
        key = id(cls)
        if key in self._classes:
            return self._classes[key]
        self._classes[key] = None
        node = cls.node
        assert isinstance(node, cst.ClassDef)
        kind: ModelKind | None = None
        for base in node.bases:
            assert cls.parent is not None
            qualname = cls.parent.resolve(base.value)
            if qualname == "torch.nn.Module":
                found: ModelKind | None = ModelKind.STATELESS
            elif qualname in LOSS_BASES:
                found = ModelKind.LOSS
            elif qualname is not None:
                found = _library_kind(qualname)
                export = self.functions.env.export(qualname) if found is None else None
                if isinstance(export, Class):
                    found = export.module  # a class of another file of the project
            else:
                local = self.functions.class_scope(base.value, cls.parent)
                found = self.class_kind(local, _depth + 1) if local and _depth < 4 else None
            if found is not None and (kind is None or found is not ModelKind.STATELESS):
                kind = found
        if kind is ModelKind.STATELESS and _holds_state(cls):
            kind = ModelKind.NETWORK
        if kind is not None and node.name.value.endswith(("Loss", "Criterion")):
            kind = ModelKind.LOSS
        self._classes[key] = kind
        return kind

    # -- identity ------------------------------------------------------------------------

    def _unwrap(
        self, value: cst.BaseExpression, scope: Scope
    ) -> tuple[cst.BaseExpression, list[cst.Call]]:
        """The module expression under `.to()`/`.cuda()`/`DataParallel(...)` and the
        calls peeled off."""
        peeled: list[cst.Call] = []
        while isinstance(value, cst.Call):
            inner = wrapped_module(value, scope)
            if inner is None:
                inner = self.values.handed_back(value, scope, None)
            if inner is None:
                break
            peeled.append(value)
            value = inner
        return value, peeled

    def _link(self) -> None:
        assignments = [
            (b, b.value or self._handed(b))
            for b in self.facts.bindings
            if b.kind is Kind.ASSIGN and (b.value or self._handed(b))
        ]
        bases: dict[int, cst.BaseExpression] = {}  # id(binding) -> its value unwrapped
        for _ in range(2):  # a second pass for aliases of models built later in the text
            for b, value in assignments:
                assert value is not None
                if self._by_symbol.get(id(b.symbol)):
                    continue
                base = bases.get(id(b))
                if base is None:
                    base = bases[id(b)] = self._unwrap(value, b.ctx.scope)[0]
                site = self._site_of(base, b)
                if site is not None:
                    self._hold(site, b.symbol)
        self._linked = True
        for b in self.facts.bindings:  # `model, head = build(opt)`: a helper of the file
            source = b.source
            if isinstance(source, cst.Call) and b.value is None and len(b.path) == 1:
                held = self._by_symbol.get(id(b.symbol))
                site = held or self._returned(source, b.ctx.scope, element=b.path[0])
                if site is not None and not held:
                    self._hold(site, b.symbol)
        for call in self.facts.calls:
            if call.method in ("to", "cuda", "cpu") and call.receiver is not None:
                model = self.of(call.receiver, call.scope)
                if model is not None and call not in model.moves:
                    model.moves.append(call)
            elif call.qualname in PARALLEL_WRAPPERS and call.node.args:
                model = self.of(call.node.args[0].value, call.scope)
                if model is not None:
                    model.wrappers.append(call)

    def _handed(self, binding: Binding) -> cst.BaseExpression | None:
        """`model, opt = accelerator.prepare(model, opt)`: what the unpacked name gets."""
        source = binding.source
        if binding.value is not None or not isinstance(source, cst.Call) or len(binding.path) != 1:
            return None
        return self.values.handed_back(source, binding.ctx.scope, binding.path[0])

    def _site_of(self, base: cst.BaseExpression, binding: Binding) -> Model | None:
        scope = binding.ctx.scope
        if isinstance(base, cst.Call):
            found = self._by_call.get(id(base))
            if found is not None:
                return found
            kind = self.kind_of_construction(base, scope)
            if kind is not None:
                construction = self.functions.site(base)
                assert construction is not None  # every call of the file is a site
                site = ModelSite(binding, kind, construction=construction, index=len(self.sites))
                site.external = self.exported(base, scope)
                self._by_call[id(base)] = site
                self.sites.append(site)
                _, peeled = self._unwrap(binding.value, scope) if binding.value else (None, [])
                for inner in peeled:
                    call = self.functions.site(inner)
                    assert call is not None
                    if call.method in ("to", "cuda", "cpu"):
                        site.moves.append(call)
                    elif call.qualname in PARALLEL_WRAPPERS:
                        site.wrappers.append(call)
                return site
            return self._returned(base, scope)
        if (
            isinstance(base, cst.Subscript)
            and self._loaded(base.value, scope)
            and self._used_as_network(binding.symbol)
        ):
            # `decoder = checkpoint["decoder"]` of a `torch.load(...)`: a module saved whole.
            model = Model(binding, ModelKind.NETWORK, external=Network(ModelKind.NETWORK))
            self.passed.append(model)
            return model
        return self.of(base, scope)

    def _loaded(self, node: cst.BaseExpression, scope: Scope) -> bool:
        return any(
            isinstance(v, cst.Call) and where.resolve(v.func) == "torch.load"
            for v, where in self.values.origins(node, scope)
        )

    def _returned(
        self, call: cst.Call, scope: Scope, depth: int = 0, element: int | None = None
    ) -> Model | None:
        """`model = build_model()` where the function of this file returns one model; with
        `element`, `model, head = build()` where it returns a tuple holding one there."""
        target = self.functions.definition(call.func, scope)
        if target is None or target.kind is not Kind.DEF or depth > MAX_DEPTH:
            return None
        key = (id(target.node), element)
        if key in self._returns:
            return self._returns[key]
        self._returns[key] = None  # while computing (a recursive function)
        assert isinstance(target.node, cst.FunctionDef)
        inner = self.functions.scope_of(target.node)
        values = self.functions.returns(target.node)
        if element is not None:
            values = [
                v.elements[element].value
                for v in values
                if isinstance(v, cst.Tuple) and element < len(v.elements)
            ]
        found = {id(s): s for r in values if (s := self.of(r, inner, depth + 1))}
        site = next(iter(found.values())) if len(found) == 1 else None
        if self._linked:
            self._returns[key] = site
        else:
            del self._returns[key]
        return site

    def _hold(self, site: Model, symbol: Symbol) -> None:
        self._by_symbol[id(symbol)] = site
        if symbol not in site.symbols:
            site.symbols.append(symbol)

    def of(self, node: cst.CSTNode, scope: Scope, _depth: int = 0) -> Model | None:
        """The model an expression holds, where provable."""
        if isinstance(node, cst.Call):
            base, peeled = self._unwrap(node, scope)
            if not peeled:
                return self._by_call.get(id(node)) or self._returned(node, scope, _depth)
            return self.of(base, scope, _depth + 1)
        symbol = scope.lookup_expr(node)
        if symbol is None:
            return None
        key = id(symbol)
        param = symbol.only(Kind.PARAM) or self._rebound_param(symbol)
        if param is None or key in self._by_symbol or not self._linked:
            return self._by_symbol.get(key)
        self._by_symbol[key] = None  # while computing, and when nothing is found
        if _depth > MAX_DEPTH:
            return None
        passed = self.functions.arguments(param)
        if not passed:
            return self._passed_in(param, symbol)
        found = [self.of(v, where, _depth + 1) for v, where in passed]
        first = found[0]
        if first is not None and all(f is first for f in found):
            self._hold(first, symbol)
            return first
        return None

    def _rebound_param(self, symbol: Symbol) -> Binding | None:
        """A parameter the function rebinds only to itself moved or wrapped (`model =
        model.to(device)`, `model = DataParallel(model)`): it holds what is passed."""
        params = [b for b in symbol.bindings if b.kind is Kind.PARAM]
        if len(params) != 1:
            return None
        for b in symbol.bindings:
            if b is params[0]:
                continue
            if b.kind is not Kind.ASSIGN or b.value is None:
                return None
            base, peeled = self._unwrap(b.value, b.ctx.scope)
            if not peeled or b.ctx.scope.lookup_expr(base) is not symbol:
                return None
        return params[0]

    def _passed_in(self, param: Binding, symbol: Symbol) -> Model | None:
        """The model another file passes for a parameter no call of this file passes; or,
        where no call is visible at all, one presumed from its use: switched between
        `.train()` and `.eval()` (or given its `.parameters()`) and called."""
        outside = self.functions.passed(param)
        network = outside.network if outside is not None else None
        if network is None and self._used_as_network(symbol) and self.functions.unseen(param):
            network = Network(ModelKind.NETWORK, presumed=True)
        if network is None:
            return None
        site = Model(param, network.kind, external=network)
        self.passed.append(site)
        self._hold(site, symbol)
        return site

    def _used_as_network(self, symbol: Symbol) -> bool:
        methods = self._methods_on.get(id(symbol), set())
        return bool(methods & {"train", "eval", "parameters"}) and "()" in methods

    @cached_property
    def _methods_on(self) -> dict[int, set[str]]:
        """id(symbol) -> the methods called on it ("()": the symbol itself is called)."""
        found: dict[int, set[str]] = {}
        for call in self.facts.calls:
            func = call.node.func
            if call.receiver is not None:
                symbol = call.scope.lookup_expr(call.receiver)
                method = call.method or ""
            else:
                symbol, method = call.scope.lookup_expr(func), "()"
            if symbol is not None:
                found.setdefault(id(symbol), set()).add(method)
        return found

    def holds_only(self, site: Model) -> bool:
        """Every assignment to the names holding `site` keeps holding it: none rebinds
        them to a value of another origin (`model = load(...)`)."""
        for symbol in site.symbols:
            for b in symbol.bindings:
                if b.kind is Kind.PARAM:
                    continue
                if b.kind is not Kind.ASSIGN or b.value is None:
                    return False
                base, _ = self._unwrap(b.value, b.ctx.scope)
                built = site.construction.node if isinstance(site, ModelSite) else None
                if base is not built and self.of(base, b.ctx.scope) is not site:
                    return False
        return True

    def called(self, call: CallSite) -> Model | None:
        """The model a call such as `model(x)` / `self.net(x)` runs, or a submodule of a
        network of this file called on its own (`model.encoder(x)`)."""
        func = call.node.func
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return None
        found = self.of(func, call.scope)
        if found is None and isinstance(func, cst.Attribute):
            found = self._submodule(func, call.scope)
        return found

    def called_on_itself(self, call: CallSite) -> Scope | None:
        """The network class of this file whose method calls its own instance, `self(x)`
        (a sampling method beside `forward`: minGPT's `generate`): the class's scope."""
        func = call.node.func
        scope = call.scope
        if not isinstance(func, cst.Name) or func.value != scope.self_name:
            return None
        cls = scope.class_scope
        return cls if cls is not None and self.class_kind(cls) is ModelKind.NETWORK else None

    def _submodule(self, func: cst.Attribute, scope: Scope) -> Model | None:
        """`model.encoder(x)` for `model` a network built from a class of this file: a
        submodule its `__init__` assigns (`self.encoder = nn.Sequential(...)`), or a
        method that runs its layers (`def encoder(self, x): return self.linear_1(x)`):
        `model` runs (its `.eval()` and autograd state are the submodule's)."""
        owner = self.of(func.value, scope)
        if not isinstance(owner, ModelSite) or not owner.is_network:
            return None
        construction = owner.construction
        cls = self.functions.class_scope(construction.node.func, construction.scope)
        member = cls.member(func.attr.value) if cls is not None else None
        if member is None or len(member.bindings) != 1:
            return None
        bound = member.bindings[0]
        if bound.kind is Kind.ASSIGN and isinstance(bound.value, cst.Call):
            found = self.of(bound.value, bound.ctx.scope)
            qualname = bound.ctx.scope.resolve(bound.value.func) or ""
            network = found.is_network if found is not None else None
            if network is None:
                network = _library_kind(qualname) is ModelKind.NETWORK
            return owner if network else None  # the owner's mode and grad state hold
        if bound.kind is Kind.DEF and isinstance(bound.node, cst.FunctionDef):
            method = self.functions.scope_of(bound.node)
            runs = any(
                isinstance(n, cst.Call)
                and isinstance(n.func, cst.Attribute)
                and (layer := self.of(n.func, method)) is not None
                and layer.is_network
                for n in descendants(bound.node.body)
            )
            return owner if runs else None
        return None

    @cached_property
    def _method_calls_on_models(self) -> dict[int, list[CallSite]]:
        found: dict[int, list[CallSite]] = {}
        for call in self.facts.calls:
            if call.receiver is not None:
                site = self.of(call.receiver, call.scope)
                if site is not None:
                    found.setdefault(id(site), []).append(call)
        return found

    def method_calls_on(self, site: Model) -> list[CallSite]:
        """The method calls whose receiver is the model (`model.eval()`, `model.to(...)`)."""
        return self._method_calls_on_models.get(id(site), [])

    def network_calls(self, loop: Loop) -> list[CallSite]:
        """Calls of networks (not losses) in the loop's body."""
        return [c for c in loop.calls if (m := self.called(c)) is not None and m.is_network]


def _zoo_lookup(func: cst.BaseExpression, scope: Scope) -> bool:
    """`models.__dict__[args.arch]` or `getattr(models, args.arch)`: a network picked by
    name from an imported module of networks (see ZOO_MODULES)."""
    module: cst.BaseExpression | None = None
    if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Attribute):
        if func.value.attr.value == "__dict__":
            module = func.value.value
    elif isinstance(func, cst.Call) and func.args and scope.resolve(func.func) == "getattr":
        module = func.args[0].value
    qualname = scope.resolve(module) if module is not None else None
    if qualname is None:  # not an imported module
        return False
    return f"{qualname}.".startswith(ZOO_PREFIXES) or bool(
        ZOO_MODULES.intersection(qualname.split("."))
    )


def _library_kind(qualname: str) -> ModelKind | None:
    if qualname.startswith("torch.nn.") and not qualname.startswith("torch.nn.functional"):
        last = qualname.rsplit(".", 1)[-1]
        if not last[:1].isupper() or last in NOT_MODULES or qualname in MODULE_WRAPPERS:
            return None
        if last.endswith("Loss"):
            return ModelKind.LOSS
        return ModelKind.STATELESS if last in STATELESS_LAYERS else ModelKind.NETWORK
    if qualname.startswith(ZOO_PREFIXES):
        return ModelKind.NETWORK
    if qualname.startswith("transformers.") and qualname.endswith(".from_pretrained"):
        return ModelKind.NETWORK
    if DIFFUSERS_MODELS.match(qualname) or PEFT_LOADERS.match(qualname):
        return ModelKind.NETWORK
    return None


def _holds_state(cls: Scope) -> bool:
    """A class deriving from nn.Module directly has parameters when its methods set
    attributes on `self` (submodules, parameters) or register them."""
    return bool(cls.attributes)
