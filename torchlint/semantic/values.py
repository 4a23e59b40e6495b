"""Constants a rule can read through names: literals, constants bound once, argparse
defaults (`args.batch_size`), dict and namespace configs, parameters (what the calls of
this file pass, else the default)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.external import Global
from torchlint.semantic.functions import Functions
from torchlint.semantic.scopes import Binding, CallSite, Kind, Scope
from torchlint.semantic.syntax import (
    MISSING,
    argument,
    bool_value,
    int_value,
    keyword,
    str_value,
)

Value = int | float | str | bool | None

NAMESPACES = ("types.SimpleNamespace", "argparse.Namespace", "dict")
PARSE_METHODS = ("parse_args", "parse_known_args")
MAX_DEPTH = 4
COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "GreaterThan": operator.gt,
    "GreaterThanEqual": operator.ge,
    "LessThan": operator.lt,
    "LessThanEqual": operator.le,
    "Equal": operator.eq,
    "NotEqual": operator.ne,
}
# Methods that hand back what they are given, wrapped for the device and the processes
# they manage (`model, optimizer, loader = accelerator.prepare(model, optimizer, loader)`),
# by the class of the object they are called on.
HANDING_BACK = {
    "accelerate.Accelerator": frozenset(
        {"prepare", "prepare_model", "prepare_optimizer", "prepare_data_loader"}
    ),
    "lightning.Fabric": frozenset({"setup", "setup_module", "setup_dataloaders"}),
    "lightning.fabric.Fabric": frozenset({"setup", "setup_module", "setup_dataloaders"}),
    "lightning_fabric.Fabric": frozenset({"setup", "setup_module", "setup_dataloaders"}),
}
HANDING_BACK_METHODS = frozenset().union(*HANDING_BACK.values())
ENVIRONMENT_READS = ("os.getenv", "os.environ.get")
STRING_METHODS: dict[str, Callable[[str], str]] = {
    "lower": str.lower,
    "upper": str.upper,
    "strip": str.strip,
}
CASTS: dict[str, Callable[[Any], Value]] = {"str": str, "int": int, "bool": bool}
FLAG_DEFAULTS = {"store_true": cst.Name("False"), "store_false": cst.Name("True")}


@dataclass(frozen=True)
class Constant:
    value: Value
    node: cst.BaseExpression  # the literal that writes the value
    # "literal" | "name" | "argparse" | "config" | "argument" | "default" | "hparams",
    # or "project": another file of the project writes it (`node` is where it is read)
    origin: str


def literal(node: cst.CSTNode | None) -> tuple[bool, Value]:
    """(True, value) for an int/float/str/bool/None literal, else (False, None)."""
    if node is None:
        return False, None
    number = int_value(node)
    if number is not None:
        return True, number
    if isinstance(node, cst.Float):
        return True, float(node.value.replace("_", ""))
    text = str_value(node)
    if text is not None:
        return True, text
    flag = bool_value(node)
    if flag is not None:
        return True, flag
    if isinstance(node, cst.Name) and node.value == "None":
        return True, None
    return False, None


@dataclass(frozen=True)
class Option:
    """An argparse option: its `add_argument` call and default (None when absent)."""

    call: CallSite
    default: cst.BaseExpression | None


class Values:
    def __init__(self, facts: Facts, functions: Functions) -> None:
        self.facts = facts
        self.functions = functions
        self._options: dict[str, list[Option]] | None = None

    def numel(
        self,
        sizes: list[cst.BaseExpression],
        scope: Scope,
        otherwise: Callable[[cst.BaseExpression], int | None] | None = None,
    ) -> int | None:
        """The elements of a tensor of the shape these size arguments give, where each
        is an int constant (a literal, a name bound once, an argparse default) or what
        `otherwise` says of it: `(2, 3)`, `2, 3`, `[n]`, `()` (a scalar: 1); None
        otherwise."""
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
            elements = sizes[0].elements
            if any(isinstance(e, cst.StarredElement) for e in elements):
                return None
            sizes = [e.value for e in elements]
        count = 1
        for size in sizes:
            found = self.constant(size, scope)
            value = found.value if found is not None else None
            if not isinstance(value, int) or isinstance(value, bool):
                value = otherwise(size) if otherwise is not None else None
            if value is None:
                return None
            count *= max(value, 0)
        return count

    def constant(self, node: cst.CSTNode, scope: Scope, _depth: int = 0) -> Constant | None:
        """The value of `node` where it is provably one constant."""
        is_literal, value = literal(node)
        if is_literal:
            assert isinstance(node, cst.BaseExpression)
            return Constant(value, node, "literal")
        if _depth > MAX_DEPTH:
            return None
        option = self.option(node, scope)
        if option is not None:
            if option.default is None:
                return None
            found = self.constant(option.default, option.call.scope, _depth + 1)
            return Constant(found.value, found.node, "argparse") if found else None
        hparam = self._hparam(node, scope)
        if hparam is not None:  # Lightning: what `__init__` was given for it
            found = self._parameter(hparam, _depth)
            return Constant(found.value, found.node, "hparams") if found else None
        if isinstance(node, cst.Subscript):
            return self._item(node, scope, _depth)
        if (
            isinstance(node, cst.Call)
            and len(node.args) == 1
            and not node.args[0].keyword
            and not node.args[0].star
            and scope.resolve(node.func) == "int"
        ):  # `ngpu = int(opt.ngpu)`
            found = self.constant(node.args[0].value, scope, _depth + 1)
            if found is None or not isinstance(found.value, int):  # bools included
                return None
            return Constant(int(found.value), found.node, found.origin)
        if isinstance(node, cst.BinaryOperation):
            return self._arithmetic(node, scope, _depth)
        symbol = scope.lookup_expr(node)
        if symbol is None:
            return (
                self._namespace_field(node, scope, _depth)
                if isinstance(node, cst.Attribute)
                else None
            )
        if len(symbol.bindings) != 1:
            return None
        binding = symbol.bindings[0]
        if binding.kind is Kind.ASSIGN and binding.value is not None:
            found = self.constant(binding.value, binding.ctx.scope, _depth + 1)
            if found is None:
                return None
            origin = "name" if found.origin == "literal" else found.origin
            return Constant(found.value, found.node, origin)
        if binding.kind is Kind.PARAM:
            return self._parameter(binding, _depth)
        if binding.kind is Kind.IMPORT and isinstance(node, cst.BaseExpression):
            return self._imported(binding, node)
        return None

    def truth(self, test: cst.BaseExpression, scope: Scope) -> Constant | None:
        """Whether a test is true, where the file's constants decide it: a constant
        (`DEBUG`), `not` one, or a comparison of two int constants (`num_gpus > 1`); its
        origin is the constant's (an argparse default: an option can change it)."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            found = self.truth(test.expression, scope)
            return Constant(not found.value, found.node, found.origin) if found else None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            compare = test.comparisons[0]
            kind = type(compare.operator).__name__
            operands = self._ints(test.left, compare.comparator, scope, 0)
            if operands is None or kind not in COMPARISONS:
                return None
            left, right, origin = operands
            return Constant(COMPARISONS[kind](left, right), test, origin)
        found = self.constant(test, scope)
        return Constant(bool(found.value), found.node, found.origin) if found else None

    def by_default(self, node: cst.BaseExpression, scope: Scope) -> Constant | None:
        """A constant, or what a name bound once to a read of an environment variable is
        when the variable is not set (`PIN_MEMORY = str(os.getenv("PIN_MEMORY",
        "true")).lower() == "true"`: True), origin "environment"."""
        found = self.constant(node, scope)
        symbol = scope.lookup_expr(node) if found is None else None
        binding = symbol.only(Kind.ASSIGN) if symbol is not None else None
        if binding is None or binding.value is None:
            return found
        known, value = _unset(binding.value, binding.ctx.scope)
        return Constant(value, binding.value, "environment") if known else None

    def _arithmetic(self, node: cst.BinaryOperation, scope: Scope, depth: int) -> Constant | None:
        """`28 * 28`, `hidden // 2`, `n + 1` of int constants; its origin is that of the
        first operand that is not a literal (an argparse default stays one)."""
        operands = self._ints(node.left, node.right, scope, depth + 1)
        if operands is None:
            return None
        left, right, origin = operands
        kind = type(node.operator).__name__
        if kind == "FloorDivide" and right:
            value = left // right
        elif kind in ("Add", "Subtract", "Multiply"):
            value = {"Add": left + right, "Subtract": left - right, "Multiply": left * right}[kind]
        else:
            return None
        return Constant(value, node, origin)

    def _ints(
        self, left: cst.BaseExpression, right: cst.BaseExpression, scope: Scope, depth: int
    ) -> tuple[int, int, str] | None:
        """Two int constants (not bools), with the origin of the first not written in the
        file itself (an argparse default stays one); "literal" where both are."""
        sides = [self.constant(n, scope, depth) for n in (left, right)]
        values = [s.value for s in sides if s is not None and type(s.value) is int]
        if len(values) != 2:
            return None
        origins = [s.origin for s in sides if s is not None and s.origin not in ("literal", "name")]
        first, second = (int(v) for v in values)
        return first, second, origins[0] if origins else "literal"

    def _parameter(self, binding: Binding, depth: int) -> Constant | None:
        passed = self.functions.arguments(binding)
        if passed is None:
            elsewhere = self._passed_elsewhere(binding)
            if elsewhere is not None:
                return elsewhere
            if self.functions.always_passed(binding):
                return None  # every call of the project passes it: not the default
            default = self.functions.default(binding)
            found = self.constant(*default, depth + 1) if default is not None else None
            return Constant(found.value, found.node, "default") if found else None
        results = []
        for value, where in passed:
            found = self.constant(value, where, depth + 1)
            if found is None:
                return None
            results.append(found)
        if len({(type(r.value), r.value) for r in results}) != 1:
            return None
        return Constant(results[0].value, results[0].node, "argument")

    def _passed_elsewhere(self, binding: Binding) -> Constant | None:
        """The int every other file of the project passes for a parameter no call of
        this file passes (`make_loaders(batch_size=8)` in train.py), origin "project"."""
        function = binding.symbol.scope.node
        if not isinstance(function, cst.FunctionDef) or self.functions.callers(function):
            return None
        value = self.functions.passed(binding)
        if value is None or value.number is None or not isinstance(binding.node, cst.Param):
            return None
        return Constant(value.number, binding.node.name, "project")

    def _imported(self, binding: Binding, node: cst.BaseExpression) -> Constant | None:
        """An int constant another file of the project defines (`from config import
        BATCH_SIZE`), origin "project"."""
        found = self.functions.env.export(binding.qualname) if binding.qualname else None
        number = found.value.number if isinstance(found, Global) else None
        return Constant(number, node, "project") if number is not None else None

    def _hparam(self, node: cst.CSTNode, scope: Scope) -> Binding | None:
        """`self.hparams.batch_size` (or `self.hparams["batch_size"]`) in a class whose
        `__init__` calls `self.save_hyperparameters()`: that `__init__` parameter."""
        name: str | None
        if isinstance(node, cst.Attribute):
            holder, name = node.value, node.attr.value
        elif isinstance(node, cst.Subscript) and len(node.slice) == 1:
            index = node.slice[0].slice
            holder = node.value
            name = str_value(index.value) if isinstance(index, cst.Index) else None
        else:
            return None
        if not (isinstance(holder, cst.Attribute) and holder.attr.value == "hparams"):
            return None
        method = scope.function
        cls = method.class_scope if method is not None else None
        owner = holder.value
        if cls is None or name is None or not isinstance(owner, cst.Name):
            return None
        if method is None or owner.value != method.self_name:
            return None
        init = cls.member("__init__")
        binding = init.only(Kind.DEF) if init is not None else None
        if binding is None:
            return None
        init_scope = self.functions.scope_of(binding.node)  # type: ignore[arg-type]
        saves = any(
            c.ctx.scope is init_scope
            for c in self.facts.calls_by_method.get("save_hyperparameters", ())
        )
        param = init_scope.symbols.get(name)
        return param.only(Kind.PARAM) if saves and param is not None else None

    def _item(self, node: cst.Subscript, scope: Scope, depth: int) -> Constant | None:
        """`config["batch_size"]` of a dict literal (or `dict(...)`) bound once."""
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        key = str_value(node.slice[0].slice.value)
        mapping = self._mapping(node.value, scope)
        if key is None or mapping is None:
            return None
        value, where = mapping
        if isinstance(value, cst.Call) and where.resolve(value.func) == "locals":
            symbol = where.symbols.get(key)  # `config = locals()`: the function's parameter
            param = symbol.only(Kind.PARAM) if symbol is not None else None
            found = self._parameter(param, depth) if param is not None else None
            return Constant(found.value, found.node, "config") if found else None
        entry = _entry(value, key)
        if entry is None:
            return None
        found = self.constant(entry, where, depth + 1)
        return Constant(found.value, found.node, "config") if found else None

    def _namespace_field(self, node: cst.Attribute, scope: Scope, depth: int) -> Constant | None:
        """`cfg.batch_size` of `cfg = SimpleNamespace(batch_size=8)` bound once."""
        mapping = self._mapping(node.value, scope)
        if mapping is None:
            return None
        value, where = mapping
        if not isinstance(value, cst.Call):
            return None
        entry = _entry(value, node.attr.value)
        found = self.constant(entry, where, depth + 1) if entry is not None else None
        return Constant(found.value, found.node, "config") if found else None

    def _mapping(
        self, node: cst.BaseExpression, scope: Scope, depth: int = 0
    ) -> tuple[cst.BaseExpression, Scope] | None:
        """The dict, namespace or `locals()` a name is bound to once, followed through
        the one thing every call of the file passes for a parameter."""
        symbol = scope.lookup_expr(node)
        if symbol is None or depth > MAX_DEPTH:
            return None
        param = symbol.only(Kind.PARAM)
        if param is not None:
            passed = self.functions.arguments(param)
            if passed is None or len({id(value) for value, _ in passed}) != 1:
                return None
            return self._mapping(passed[0][0], passed[0][1], depth + 1)
        binding = symbol.only(Kind.ASSIGN)
        if binding is None or binding.value is None:
            return None
        value = binding.value
        if isinstance(value, cst.Dict):
            return value, binding.ctx.scope
        if isinstance(value, cst.Call) and binding.ctx.scope.resolve(value.func) in (
            *NAMESPACES,
            "locals",
        ):
            return value, binding.ctx.scope
        return None

    # -- where a value comes from ---------------------------------------------------------

    def origins(
        self, node: cst.BaseExpression, scope: Scope, _depth: int = 0
    ) -> list[tuple[cst.BaseExpression, Scope]]:
        """The expressions `node` may evaluate, followed through names, parameters (what
        the calls of this file pass), functions of this file (what they return) and tuple
        unpacking. A name or parameter that cannot be followed is its own origin."""
        if _depth > MAX_DEPTH:
            return [(node, scope)]
        if isinstance(node, cst.Call):
            given = self.handed_back(node, scope, None)
            if given is not None:
                return self.origins(given, scope, _depth + 1)
            returned = self._returned(node, scope, None, _depth)
            return returned if returned is not None else [(node, scope)]
        symbol = scope.lookup_expr(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if symbol is None or not symbol.bindings:
            return [(node, scope)]
        found: list[tuple[cst.BaseExpression, Scope]] = []
        for b in symbol.bindings:
            if b.kind is Kind.ASSIGN and b.value is not None:
                found += self.origins(b.value, b.ctx.scope, _depth + 1)
            elif b.kind is Kind.ASSIGN and isinstance(b.source, cst.Call) and len(b.path) == 1:
                given = self.handed_back(b.source, b.ctx.scope, b.path[0])
                if given is not None:
                    found += self.origins(given, b.ctx.scope, _depth + 1)
                    continue
                returned = self._returned(b.source, b.ctx.scope, b.path[0], _depth)
                found += returned if returned is not None else [(node, scope)]
            elif b.kind is Kind.PARAM and (passed := self.functions.arguments(b)):
                for value, where in passed:
                    found += self.origins(value, where, _depth + 1)
            else:
                found.append((node, scope))
        return found

    def handed_back(
        self, call: cst.Call, scope: Scope, element: int | None
    ) -> cst.BaseExpression | None:
        """The argument a call hands back (the `element`-th of those it is given, or the
        only one) when it is a method that returns its arguments wrapped: Accelerate's
        `accelerator.prepare(...)`, Lightning Fabric's `fabric.setup(...)`; or a function
        of another file of the project that returns a parameter as it came."""
        found = self._wrapper_hands_back(call, scope, element)
        return found if found is not None else self._returns_argument(call, element)

    def _returns_argument(self, call: cst.Call, element: int | None) -> cst.BaseExpression | None:
        """The argument a call of another file's function passes for the parameter the
        function returns (the `element`-th of its tuple) as it came: that file's summary
        names the parameter (`return model`), each call gets its own argument back."""
        site = self.functions.site(call)
        external = self.functions.external(site) if site is not None else None
        if external is None:
            return None
        function, offset = external
        value = function.returned(element)
        if value is None or value.without_params() or len(value.params) != 1:
            return None
        ref, _, name = next(iter(value.params)).rpartition(":")
        if ref != function.ref or name not in function.params:
            return None
        index = function.params.index(name) - offset
        if index < 0 and function.method and isinstance(call.func, cst.Attribute):
            return call.func.value  # `obj.method()` returning `self`: the object itself
        found = argument(call, name, index=index) if index >= 0 else MISSING
        return found if found is not MISSING else None

    def _wrapper_hands_back(
        self, call: cst.Call, scope: Scope, element: int | None
    ) -> cst.BaseExpression | None:
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value not in HANDING_BACK_METHODS:
            return None
        owners = {
            scope_.resolve(value.func)
            for value, scope_ in self.origins(func.value, scope)
            if isinstance(value, cst.Call)
        }
        if not any(func.attr.value in HANDING_BACK.get(o or "", ()) for o in owners):
            return None
        args = [a.value for a in call.args if a.keyword is None and not a.star]
        if len(args) != len(call.args):
            return None
        if element is None:
            return args[0] if len(args) == 1 else None
        return args[element] if element < len(args) else None

    def _returned(
        self, call: cst.Call, scope: Scope, element: int | None, depth: int
    ) -> list[tuple[cst.BaseExpression, Scope]] | None:
        """What a function of this file returns (the `element`-th of a tuple); None when
        the call is not to one."""
        target = self.functions.definition(call.func, scope)
        if target is None or target.kind is not Kind.DEF:
            return None
        assert isinstance(target.node, cst.FunctionDef)
        inner = self.functions.scope_of(target.node)
        found: list[tuple[cst.BaseExpression, Scope]] = []
        for value in self.functions.returns(target.node):
            if element is not None:
                if not isinstance(value, cst.Tuple) or element >= len(value.elements):
                    return None
                value = value.elements[element].value
            found += self.origins(value, inner, depth + 1)
        return found or None

    # -- argparse ------------------------------------------------------------------------

    def option(self, node: cst.CSTNode, scope: Scope) -> Option | None:
        """The argparse option `node` reads (`args.batch_size`), when the file defines
        exactly one option of that name; None otherwise."""
        if not isinstance(node, cst.Attribute) or not self.is_namespace(node.value, scope):
            return None
        found = self.options.get(node.attr.value, [])
        return found[0] if len(found) == 1 else None

    def is_namespace(self, node: cst.BaseExpression, scope: Scope, _depth: int = 0) -> bool:
        """`node` holds what `parser.parse_args()` returned (through one assignment, a
        parameter the calls of this file pass it to, or a function that returns it)."""
        if _depth > MAX_DEPTH:
            return False
        if isinstance(node, cst.Call):
            return isinstance(node.func, cst.Attribute) and node.func.attr.value in PARSE_METHODS
        if isinstance(node, cst.Subscript):  # parser.parse_known_args()[0]
            return self.is_namespace(node.value, scope, _depth + 1)
        symbol = scope.lookup_expr(node)
        if symbol is None or not symbol.bindings:
            return False
        for b in symbol.bindings:
            if b.kind is Kind.PARAM:
                passed = self.functions.arguments(b)
                if not passed or not all(
                    self.is_namespace(value, where, _depth + 1) for value, where in passed
                ):
                    return False
            elif b.kind is Kind.ASSIGN:
                value = b.value if b.value is not None else b.source
                if value is None or not self._returns_namespace(value, b.ctx.scope, _depth):
                    return False
            else:
                return False
        return True

    def _returns_namespace(self, value: cst.BaseExpression, scope: Scope, depth: int) -> bool:
        if self.is_namespace(value, scope, depth + 1):
            return True
        if not isinstance(value, cst.Call):
            return False
        found = self.functions.returned(value.func, scope)
        if found is None:
            return False
        returns, inner = found
        return bool(returns) and all(self.is_namespace(r, inner, depth + 1) for r in returns)

    @property
    def options(self) -> dict[str, list[Option]]:
        """Every `add_argument` of the file by destination."""
        if self._options is None:
            self._options = {}
            for call in self.facts.calls_by_method.get("add_argument", ()):
                dest = _destination(call)
                if dest is None:
                    continue
                default: cst.BaseExpression | None = call.kwarg("default")
                if default is MISSING:
                    default = FLAG_DEFAULTS.get(str_value(call.kwarg("action")) or "")
                self._options.setdefault(dest, []).append(Option(call, default))
        return self._options


def _unset(node: cst.BaseExpression, scope: Scope) -> tuple[bool, Value]:
    """(True, value) of an expression of environment reads when no variable is set: a
    read's default, `str`/`int`/`bool` of it, `.lower()`/`.upper()`/`.strip()`, `==`/`!=`
    of two such values; (False, None) for anything else."""
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        compare = node.comparisons[0]
        (known, left), (also, right) = _unset(node.left, scope), _unset(compare.comparator, scope)
        if not (known and also and isinstance(compare.operator, cst.Equal | cst.NotEqual)):
            return False, None
        return True, (left == right) is isinstance(compare.operator, cst.Equal)
    if not isinstance(node, cst.Call):
        return literal(node)
    args = [a.value for a in node.args if not a.keyword and not a.star]
    func = node.func
    if isinstance(func, cst.Attribute) and func.attr.value in STRING_METHODS and not args:
        known, inner = _unset(func.value, scope)
        if known and isinstance(inner, str):
            return True, STRING_METHODS[func.attr.value](inner)
        return False, None
    name = scope.resolve(func)
    if name in ENVIRONMENT_READS and len(args) == 2 == len(node.args):
        return literal(args[1])
    if name in CASTS and len(args) == 1 == len(node.args):
        known, inner = _unset(args[0], scope)
        try:
            return (True, CASTS[name](inner)) if known else (False, None)
        except (TypeError, ValueError):
            return False, None
    return False, None


def _destination(call: CallSite) -> str | None:
    dest = str_value(call.kwarg("dest"))
    if dest is not None:
        return dest
    names = [str_value(a) for a in call.positional]
    if not names or any(n is None for n in names):
        return None
    long = next((n for n in names if n and n.startswith("--")), None)
    name = long or names[0] or ""
    return name.lstrip("-").replace("-", "_") or None


def _entry(mapping: cst.BaseExpression, key: str) -> cst.BaseExpression | None:
    if isinstance(mapping, cst.Dict):
        for element in mapping.elements:
            if isinstance(element, cst.DictElement) and str_value(element.key) == key:
                return element.value
        return None
    if isinstance(mapping, cst.Call):
        value = keyword(mapping, key)
        return None if value is MISSING else value
    return None
