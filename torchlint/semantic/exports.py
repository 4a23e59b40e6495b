"""What a file tells the rest of its project (a `Summary`), read off its facts: the
classes, functions and module-level values other files may import; the calls it makes
into other files (what they pass and in what context) and the calls that hand its
functions' parameters on (so that linking can follow a value through them); what each
function does with the loaders and models it is given; and what its loops do with the
loaders other files build."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import libcst as cst

from torchlint.semantic.datasets import ITERABLE_DATASET
from torchlint.semantic.external import Call, Class, Dataset, Function, Global, Summary, Uses
from torchlint.semantic.gradients import freezes
from torchlint.semantic.host import cpu_loop, host_number
from torchlint.semantic.lattice import ModelKind
from torchlint.semantic.loader_classes import loader_class
from torchlint.semantic.loaders import Elsewhere, Loader
from torchlint.semantic.loops import is_periodic
from torchlint.semantic.models import PARALLEL_WRAPPERS, Model, ModelSite
from torchlint.semantic.module import TorchModule
from torchlint.semantic.portable import OPTIMIZER, SCALER, Effect, Network, Value, join_values
from torchlint.semantic.samples import text_samples
from torchlint.semantic.scopes import Binding, CallSite, Kind, Loop, Scope, Symbol
from torchlint.semantic.syntax import HOST_READS, MISSING, str_value
from torchlint.text.walk import descendants

DATASET_BASES = ("torch.utils.data.Dataset", ITERABLE_DATASET)
# Where an int constant comes from, for it to be told to other files.
NUMBER_ORIGINS = frozenset({"literal", "name", "argparse", "config", "project"})
# Expressions that hold nothing another file needs to know (numbers, flags, text...).
PLAIN = (
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.Comparison,
    cst.BooleanOperation,
    cst.UnaryOperation,
    cst.Lambda,
    cst.FormattedString,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)


def summarize(module: TorchModule) -> Summary:
    return _Exporter(module).summary()


class _Exporter:
    def __init__(self, module: TorchModule) -> None:
        self.module = module
        self.env = module.env
        self.functions = module.functions

    def summary(self) -> Summary:
        summary = Summary(stars=tuple(self.module.facts.stars))
        for name, symbol in self.module.scope.symbols.items():
            bindings = symbol.bindings
            if not bindings:
                continue
            if all(b.kind is Kind.IMPORT for b in bindings):
                qualname = symbol.imported
                if qualname is not None:
                    summary.imports[name] = qualname
                continue
            binding = symbol.only(Kind.DEF, Kind.CLASS)
            if binding is not None and binding.kind is Kind.DEF:
                assert isinstance(binding.node, cst.FunctionDef)
                summary.exports[name] = self.function(binding.node)
            elif binding is not None:
                assert isinstance(binding.node, cst.ClassDef)
                summary.exports[name] = self.cls(self.functions.scope_of(binding.node))
            elif all(b.kind is Kind.ASSIGN and b.value is not None for b in bindings):
                if name == "__all__":
                    summary.public = _names(bindings[0].value) if len(bindings) == 1 else None
                    continue
                value = join_values(self.describe(b.value, b.ctx.scope) for b in bindings)
                if value:
                    summary.exports[name] = Global(self.env.ref(name), value)
        if self.env.linked:
            summary.calls = self.calls()
            summary.uses = self.uses()
        return summary

    # -- values ------------------------------------------------------------------------

    def describe(self, node: cst.CSTNode | None, scope: Scope) -> Value | None:
        """What an expression holds, as another file needs to know it."""
        if not isinstance(node, cst.BaseExpression):
            return None
        number = self.number(node, scope)
        if number is not None:
            return Value(number=number)
        if isinstance(node, PLAIN):
            return None
        module = self.module
        site = module.models.of(node, scope)
        loaders = module.loaders.of(node, scope)
        kind = module.training.kind(node, scope)
        value = Value(
            device=module.devices.named(node, scope),
            network=self.network(site) if site is not None else self.constructed(node, scope),
            loaders=frozenset(self.loader_ref(s) for s in loaders),
            pinned=frozenset(self.loader_ref(s) for s in loaders if module.loaders.pins_memory(s)),
            optimizer=kind if kind in (OPTIMIZER, SCALER) else None,
            instance=self.instance(node, scope),
            params=self.params(node, scope),
        )
        return self.named(value) or None

    def number(self, node: cst.BaseExpression, scope: Scope) -> int | None:
        """An int the file writes for `node` (a literal, a name bound once to one, an
        argparse or config default): what another file receives as a constant. Not a
        parameter's default (callers elsewhere may pass another), nor a bool."""
        found = self.module.values.constant(node, scope)
        if found is None or found.origin not in NUMBER_ORIGINS:
            return None
        value = found.value
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def named(self, value: Value) -> Value:
        """A value that holds a parameter and nothing it does not receive from the other
        files is the parameter alone: what it holds is resolved where it is used (each call
        of a function returning it gets its own argument back: `Values.handed_back`;
        linking resolves what a call passes), and the summary does not change with what
        the project passes (the files importing this one are not analysed again)."""
        if len(value.params) != 1:
            return value
        ref, _, name = next(iter(value.params)).rpartition(":")
        received = self.env.received(ref.partition("::")[2], name)
        if received is None or not value.within(received):
            return value
        return Value(params=value.params)

    def network(self, site: Model) -> Network:
        module = self.module
        if not isinstance(site, ModelSite):  # built elsewhere: what the other file said
            assert site.external is not None
            return site.external
        external = site.external
        return Network(
            site.kind,
            site=self.env.site(f"@{site.index}"),
            cls=external.cls if external is not None else site.construction.qualname,
            on_gpu=module.on_gpu(site),
            wrapped=bool(site.wrappers),
            layers=module.networks.layers(site) if site.is_network else frozenset(),
            parameters=module.networks.parameters(site) if site.is_network else None,
            sequence_first=site.is_network and module.networks.sequence_first(site),
        )

    def constructed(self, node: cst.BaseExpression, scope: Scope) -> Network | None:
        """The module a construction no name holds builds (a factory's `return
        ResNet(BasicBlock, [2, 2, 2, 2])`): what its class says."""
        module = self.module
        if not isinstance(node, cst.Call):
            return None
        kind = module.models.kind_of_construction(node, scope)
        if kind is None:
            return None
        cls = self.functions.class_scope(node.func, scope)
        if cls is None:
            exported = module.models.exported(node, scope)
            return exported or Network(kind, cls=scope.resolve(node.func))
        return Network(kind, cls=self._class_ref(cls), **self._class_network(cls, kind))

    def loader_ref(self, site: Loader) -> str:
        if isinstance(site, Elsewhere):
            return site.ref
        return self.env.site(f"#{site.index}")

    def instance(self, node: cst.BaseExpression, scope: Scope) -> str | None:
        cls = self.functions.instance_class(node, scope)
        if cls is not None:
            name = self.functions.local_name(cls.node)
            return self.env.ref(name) if name is not None else None
        found = self.functions.instance_export(node, scope)
        return found.ref if found is not None else None

    def params(self, node: cst.BaseExpression, scope: Scope) -> frozenset[str]:
        """The parameters of this file's functions an expression may hold (through `.to()`,
        `DataParallel(...)`, a call that hands back its argument and the like)."""
        base, _ = self.module.models._unwrap(node, scope)
        param = self.param(base, scope, wrapped=True)
        return frozenset({param}) if param is not None else frozenset()

    def param(self, node: cst.CSTNode, scope: Scope, wrapped: bool = False) -> str | None:
        """The reference of the parameter a name holds ("path::train:device"); with
        `wrapped`, also where the name is bound again to values made of the parameter
        (`loader = Shard(loader.dataset, batch_size=loader.batch_size)`)."""
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        symbol = scope.lookup_expr(node)
        if symbol is None:
            return None
        binding = symbol.only(Kind.PARAM)
        if binding is None and wrapped and _wraps(symbol):
            binding = next((b for b in symbol.bindings if b.kind is Kind.PARAM), None)
        if binding is None:
            return None
        name = self.functions.local_name(binding.symbol.scope.node)
        return self.env.ref(f"{name}:{binding.symbol.name}") if name is not None else None

    # -- functions and classes -----------------------------------------------------------

    def function(self, node: cst.FunctionDef, method: bool = False) -> Function:
        functions, training = self.functions, self.module.training
        scope = functions.scope_of(node)
        params = node.params
        name = functions.local_name(node) or node.name.value
        unpacked, arities = self.tuples(node, scope)
        return Function(
            self.env.ref(name),
            tuple(p.name.value for p in (*params.posonly_params, *params.params)),
            frozenset(p.name.value for p in params.kwonly_params),
            method=method and scope.self_name is not None,
            steps=training.does(node, "step"),
            backward=training.does(node, "backward"),
            syncs=any(
                c.method in HOST_READS or c.qualname == "torch.cuda.synchronize"
                for c in training.calls_in(node)
            ),
            returns=self.returned(functions.returns(node), scope),
            unpacked=unpacked,
            arities=arities,
            yields=functions.yields(node),
            effects=tuple(sorted(self.effects.get(id(node), {}).items())),
            saves=self.module.checkpoints.saved_parameters(node),
            wraps=self.wrapper(functions.returns(node), scope),
            varkw=params.star_kwarg.name.value if params.star_kwarg is not None else None,
        )

    def wrapper(self, nodes: list[cst.BaseExpression], scope: Scope) -> str | None:
        """The parallel wrapper every `return` puts around a parameter of the function
        (`return DDP(model, device_ids=[rank])`: a helper that wraps the model it is
        given), by its qualified name."""
        found = {
            scope.resolve(n.func)
            if isinstance(n, cst.Call) and n.args and self.own_param(n.args[0].value, scope)
            else None
            for n in nodes
        }
        wrapper = found.pop() if len(found) == 1 else None
        return wrapper if wrapper in PARALLEL_WRAPPERS else None

    def tuples(
        self, node: cst.FunctionDef, scope: Scope
    ) -> tuple[tuple[Value | None, ...], tuple[tuple[Value | None, ...], ...]]:
        """What the tuples a function returns hold, element by element, as (unpacked,
        arities): `unpacked` where every `return` returns a tuple of the same length
        (`return train_loader, val_loader`); `arities`, each length's elements, where
        the lengths differ by a flag (`return train, test` or `return train, valid,
        test`: which one a caller gets depends on the flag, but a caller that unpacks
        three names can only get the one of three). Both empty where some `return` is
        not a tuple display."""
        lengths = self._lengths(node)
        if len(lengths) == 1:
            return self._elements(node, lengths[0], scope), ()
        return (), tuple(self._elements(node, n, scope) for n in lengths)

    def _lengths(self, node: cst.FunctionDef) -> list[int]:
        """The lengths of the tuples the function returns, where every `return` returns
        a tuple display with no `*` ([] otherwise)."""
        returns = self.functions.returns(node)
        if not returns or not all(
            isinstance(r, cst.Tuple)
            and not any(isinstance(e, cst.StarredElement) for e in r.elements)
            for r in returns
        ):
            return []
        return sorted({len(r.elements) for r in returns if isinstance(r, cst.Tuple)})

    def _elements(
        self, node: cst.FunctionDef, length: int, scope: Scope
    ) -> tuple[Value | None, ...]:
        """Each element of the function's tuples of `length` elements."""
        tuples = [
            r
            for r in self.functions.returns(node)
            if isinstance(r, cst.Tuple) and len(r.elements) == length
        ]
        return tuple(
            self.returned([t.elements[i].value for t in tuples], scope) for i in range(length)
        )

    def returned(self, nodes: list[cst.BaseExpression], scope: Scope) -> Value | None:
        """What a function's `return`s (or one element of their tuples) hold. A parameter
        of the function returned as it came is named, not described (`return model`):
        each call gets back its own argument (`Values.handed_back`), not what every call
        of the project passes; and the summary does not change with what they pass."""
        own = {self.own_param(n, scope) for n in nodes}
        ref = own.pop() if len(own) == 1 else None
        if ref is not None:
            return Value(params=frozenset({ref}))
        return join_values(self.describe(n, scope) for n in nodes)

    def own_param(self, node: cst.BaseExpression, scope: Scope) -> str | None:
        """The reference of a parameter of the function of `scope` that a name holds,
        bound there only as the parameter."""
        if not isinstance(node, cst.Name):
            return None
        symbol = scope.lookup_expr(node)
        binding = symbol.only(Kind.PARAM) if symbol is not None else None
        if binding is None or binding.symbol.scope is not scope:
            return None
        return self.param(node, scope)

    def _class_ref(self, scope: Scope) -> str:
        node = scope.node
        assert isinstance(node, cst.ClassDef)
        return self.env.ref(self.functions.local_name(node) or node.name.value)

    def _class_network(self, scope: Scope, kind: ModelKind | None) -> dict[str, Any]:
        """What an instance of a class of this file is as a network (its layers, size...),
        as `Class` and `Network` both hold it."""
        module, network = self.module, kind is ModelKind.NETWORK
        assert isinstance(scope.node, cst.ClassDef)
        return {
            "layers": module.networks.class_layers(scope) if network else frozenset(),
            "parameters": module.networks.class_parameters(scope) if network else None,
            "sequence_first": network and module.networks.class_sequence_first(scope),
            "frozen": network and freezes(scope.node),
        }

    def cls(self, scope: Scope) -> Class:
        module = self.module
        kind = module.models.class_kind(scope)
        methods = []
        for member, symbol in scope.symbols.items():
            binding = symbol.only(Kind.DEF)
            if binding is not None:
                assert isinstance(binding.node, cst.FunctionDef)
                methods.append((member, self.function(binding.node, method=True)))
        loader = loader_class(scope, module.facts)
        return Class(
            self._class_ref(scope),
            module=kind,
            optimizer=module.training.optimizer_class(scope),
            **self._class_network(scope, kind),
            dataset=self.dataset(scope),
            loader=loader is not None,
            own_iteration=loader is not None and loader.own_iteration,
            methods=tuple(methods),
        )

    def dataset(self, scope: Scope) -> Dataset | None:
        """What the data-loading rules need of a Dataset class (one that derives from a
        torch Dataset, or defines `__getitem__`)."""
        node = scope.node
        assert isinstance(node, cst.ClassDef) and scope.parent is not None
        bases = {scope.parent.resolve(b.value) for b in node.bases}
        getitem = scope.member("__getitem__")
        method = getitem.only(Kind.DEF) if getitem is not None else None
        if method is None and not bases & set(DATASET_BASES):
            return None
        calls = method is not None and any(
            isinstance(n, cst.Call) for n in descendants(method.node)
        )
        return Dataset(
            per_sample=calls,
            plain=method is not None and not calls,
            sized=scope.member("__len__") is not None,
            iterable=ITERABLE_DATASET in bases,
            text=text_samples(scope),
            decodes=self.module.decoding.decoder(scope),
        )

    # -- what functions do with their parameters -------------------------------------------

    @cached_property
    def effects(self) -> dict[int, dict[str, Effect]]:
        """id(def) -> parameter name -> what the function does with it: the loops that
        iterate it (a loader) and the training loops that call it (a model)."""
        module = self.module
        found: dict[int, dict[str, Effect]] = {}

        def add(binding: Binding, effect: Effect) -> None:
            function = binding.symbol.scope.node
            if self.functions.local_name(function) is None:
                return
            by_name = found.setdefault(id(function), {})
            name = binding.symbol.name
            by_name[name] = by_name[name].join(effect) if name in by_name else effect

        for loop in module.loops:
            if not isinstance(loop.node, cst.For):
                continue
            for it in module.loaders.iterables(loop.node.iter, loop.ctx.scope):
                binding = self.param_binding(it, loop.ctx.scope)
                if binding is not None:
                    add(binding, self.loop_effect(loop))
        for loop in module.training_loops:
            for call in loop.calls:
                binding = self.param_binding(call.node.func, call.scope)
                if binding is not None:
                    add(binding, self.loop_effect(loop))
        return found

    def param_binding(self, node: cst.CSTNode, scope: Scope) -> Binding | None:
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        symbol = scope.lookup_expr(node)
        return symbol.only(Kind.PARAM) if symbol is not None else None

    def loop_effect(self, loop: Loop) -> Effect:
        """How a loop trains on what it iterates (or calls), and where the batches go."""
        gpu, devices = False, set()
        for call in loop.calls:
            if call.method not in ("to", "cuda"):
                continue
            device = self.module.devices.move(call)
            gpu = gpu or (device is not None and device.is_gpu)
            expression = self.module.devices.move_expression(call)
            param = self.param(expression, call.scope) if expression is not None else None
            if param is not None:
                devices.add(param)
        return Effect(
            trains=loop.is_training,
            steps=loop.is_step_loop or any(o.is_step_loop for o in loop.ctx.loops),
            repeated=self.repeated(loop),
            gpu=gpu,
            guarded=self.module.runs.guarded(loop.ctx, loop.node, elsewhere=False),
            devices=frozenset(devices),
            cpu=cpu_loop(self.module, loop),
        )

    def repeated(self, loop: Loop) -> bool:
        """The loop runs again and again: inside another loop, or in a function this file
        calls from a loop."""
        if loop.ctx.loops:
            return True
        function = loop.ctx.function
        return function is not None and any(
            c.ctx.loops for c, _ in self.functions.callers(function)
        )

    # -- calls and uses ------------------------------------------------------------------

    def calls(self) -> list[Call]:
        module, found = self.module, []
        for call in module.calls:
            external = self.functions.external(call)
            target = self.functions.target(call) if external is None else None
            name = self.functions.local_name(target.function) if target else None
            if external is not None:
                callee, offset = external[0].ref, external[1]
            elif target is not None and name is not None:
                callee, offset = self.env.ref(name), target.offset
            elif call.qualname is not None and self.env.knows(call.qualname):
                callee, offset = call.qualname, 0  # a plain function of the project
            elif (method := self.functions.method_called(call)) is not None:
                callee, offset = method, 1  # a plain method of an instance of the project's
            elif (method := self.functions.instance_called(call)) is not None:
                callee, offset = method, 1  # the instance itself called: its `__call__`
            else:
                continue
            given = call.node.args
            cut = next((i for i, a in enumerate(given) if a.star or a.keyword), len(given))
            keywords = [a for a in given[cut:] if a.keyword is not None and not a.star]
            if target is not None and not any(
                self.params(a.value, call.scope) for a in (*given[:cut], *keywords)
            ):
                continue  # a call within the file that hands no parameter on
            args = tuple(self.describe(a.value, call.scope) for a in given[:cut])
            kwargs = tuple(
                (a.keyword.value, v)
                for a in keywords
                if a.keyword is not None and (v := self.describe(a.value, call.scope))
            )
            values = [v for v in (*args, *(v for _, v in kwargs)) if v is not None]
            edge = self.call(call, callee, offset, args, kwargs)
            # A call inside a function that tells nothing (its callers' calls say how it
            # runs): not worth linking.
            if values or edge.caller is None or edge.per_step or edge.no_grad:
                found.append(edge)
        return found

    def call(
        self,
        call: CallSite,
        callee: str,
        offset: int,
        args: tuple[Value | None, ...],
        kwargs: tuple[tuple[str, Value], ...],
    ) -> Call:
        module = self.module
        caller = call.ctx.function
        name = self.functions.local_name(caller) if caller is not None else None
        per_step = module.runs.per_step(call.ctx) and not is_periodic(call)
        return Call(
            callee,
            name,
            args,
            kwargs,
            keywords=tuple(a.keyword.value for a in call.node.args if a.keyword and not a.star),
            star=any(a.star for a in call.node.args),
            offset=offset,
            per_step=per_step,
            gpu=per_step and (module.placement.uses_gpu or module.placement.presumed_accelerator),
            repeated=bool(call.ctx.loops),
            no_grad=module.runs.grad_disabled(call),
            guarded=module.runs.guarded(call.ctx, call.node, elsewhere=False),
            where=f"`{name}` in {self.env.path}" if name else str(self.env.path),
            numbers=tuple(
                str(i) if a.keyword is None else a.keyword.value
                for i, a in enumerate(call.node.args)
                if not a.star and host_number(module, a.value, call.scope)
            ),
        )

    def uses(self) -> list[tuple[str, Uses]]:
        """What the loops of this file, and the frameworks it starts (`trainer.fit`), do
        with loaders other files build."""
        module = self.module
        found = []
        gpu = not module.frameworks.cpu_only
        for fit in module.frameworks.fits:  # Lightning iterates them every epoch
            loader = module.frameworks.fitted(fit)
            held = module.loaders.of(loader, fit.scope) if loader is not MISSING else []
            guarded = module.runs.guarded(fit.ctx, fit.node, elsewhere=False)
            for site in held:
                if isinstance(site, Elsewhere):
                    where = f"`trainer.fit` in {self.env.path}"
                    found.append((site.ref, Uses(True, True, True, gpu, guarded, where)))
        for loop in self.module.loops:
            for site in loop.loaders:
                if isinstance(site, Elsewhere):
                    effect = self.loop_effect(loop)
                    # Under the main guard here, or in a function every call of which
                    # (in this file or the project's others: `train.py`'s `main()`) is.
                    guarded = effect.guarded or module.runs.guarded(loop.ctx, loop.node)
                    uses = Uses(
                        effect.trains,
                        effect.steps,
                        effect.repeated,
                        effect.gpu,
                        guarded,
                        self.where(loop),
                        effect.cpu,
                    )
                    found.append((site.ref, uses))
        return found

    def where(self, loop: Loop) -> str:
        function = loop.ctx.function
        name = self.functions.local_name(function) if function is not None else None
        return f"`{name}` in {self.env.path}" if name else str(self.env.path)


def _wraps(symbol: Symbol) -> bool:
    """A parameter's name is bound again only to values that read it (`x = f(x)`)."""
    return all(
        b.kind is Kind.PARAM
        or (
            b.kind is Kind.ASSIGN
            and (value := b.value if b.value is not None else b.source) is not None
            and any(isinstance(n, cst.Name) and n.value == symbol.name for n in descendants(value))
        )
        for b in symbol.bindings
    )


def _names(node: cst.BaseExpression | None) -> tuple[str, ...] | None:
    """The strings of a list or tuple literal (`__all__`), else None."""
    if not isinstance(node, (cst.List, cst.Tuple)):
        return None
    names = [str_value(e.value) for e in node.elements]
    return tuple(n for n in names if n is not None) if None not in names else None
