"""One device lattice that every rule asks: CPU | CUDA | ACCELERATOR | UNKNOWN.

- ACCELERATOR is a GPU whose type is decided at run time (`torch.accelerator`,
  `"mps"`, `"xpu"`...); it counts as a GPU.
- A conditional that is a GPU on some branch (`"cuda" if torch.cuda.is_available() else
  "cpu"`, a `--device` option defaulting to "cuda") is a GPU: the script means to use one
  where it exists.
- UNKNOWN is a device we cannot name (`args.device` with no GPU default, a parameter, a
  tensor's `.device`). It is never CPU: rules that need a GPU stay silent on it, rules that
  only need "model and batch are on different devices" treat a move to it as a move.
"""

from __future__ import annotations

import libcst as cst

from torchlint.semantic.builder import Facts
from torchlint.semantic.external import Function, Global
from torchlint.semantic.functions import Functions
from torchlint.semantic.lattice import (
    ACCELERATOR,
    CPU,
    CUDA,
    UNKNOWN,
    Device,
    DeviceKind,
    join_all,
)
from torchlint.semantic.scopes import CallSite, Kind, Scope, Symbol
from torchlint.semantic.syntax import MISSING, int_value, str_value
from torchlint.semantic.values import Values

MAX_DEPTH = 6


ACCELERATOR_TYPES = frozenset({"mps", "xpu", "xla", "hpu", "npu", "mtia", "ipu", "privateuseone"})
DTYPES = frozenset(f"torch.{t}" for t in (
    "float16", "half", "bfloat16", "float32", "float", "float64", "double", "complex64",
    "complex128", "cfloat", "cdouble", "uint8", "int8", "int16", "short", "int32", "int",
    "int64", "long", "bool", "float8_e4m3fn", "float8_e5m2",
))  # fmt: skip
# Calls that return a device.
DEVICE_CALLS = {
    "torch.accelerator.current_accelerator": ACCELERATOR,
    "torch.cuda.current_device": CUDA,
    "torch.get_default_device": UNKNOWN,
}
# The legacy typed constructors (`torch.cuda.FloatTensor(...)`): they build on the device
# of their module.
LEGACY_TENSOR_TYPES = frozenset(
    f"{t}Tensor"
    for t in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool")
)


def _from_text(text: str) -> Device | None:
    kind, _, index = text.partition(":")
    if kind == "cpu":
        return CPU
    if kind == "cuda":
        return Device(DeviceKind.CUDA, int(index) if index.isdigit() else None)
    if kind in ACCELERATOR_TYPES:
        return ACCELERATOR
    return None


class Devices:
    def __init__(self, facts: Facts, functions: Functions, values: Values) -> None:
        self.facts = facts
        self.functions = functions
        self.values = values
        self._symbols: dict[int, Device | None] = {}
        self._named: dict[int, Device | None] = {}  # the same, numbers not counted
        self._numbers = True  # an int names a CUDA device (`.to(0)`)

    def classify(self, node: cst.CSTNode, scope: Scope, _depth: int = 0) -> Device | None:
        """The device an expression names, None where it is not known to be a device."""
        if _depth > MAX_DEPTH:
            return None
        text = str_value(node)
        if text is not None:
            return _from_text(text)
        index = int_value(node)
        if index is not None:
            return Device(DeviceKind.CUDA, index) if index >= 0 and self._numbers else None
        if isinstance(node, cst.FormattedString):
            first = node.parts[0] if node.parts else None
            if isinstance(first, cst.FormattedStringText):
                return _from_text(first.value.split(":")[0]) or UNKNOWN
            if isinstance(first, cst.FormattedStringExpression):
                return self.classify(first.expression, scope, _depth + 1) or UNKNOWN
            return UNKNOWN
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            template = str_value(node.left)  # "cuda:%d" % rank
            return _from_text(template.split(":")[0]) if template is not None else None
        if isinstance(node, cst.IfExp):
            return join_all(
                [
                    d
                    for d in (
                        self.classify(node.body, scope, _depth + 1),
                        self.classify(node.orelse, scope, _depth + 1),
                    )
                    if d is not None
                ]
            )
        if isinstance(node, cst.Call):
            return self._call(node, scope, _depth)
        if isinstance(node, (cst.Name, cst.Attribute)):
            return self._name(node, scope, _depth)
        return None

    def _call(self, node: cst.Call, scope: Scope, depth: int) -> Device | None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "format":
            template = str_value(func.value)  # "cuda:{}".format(rank)
            return _from_text(template.split(":")[0]) if template is not None else None
        qualname = scope.resolve(func)
        if qualname == "torch.device":
            kind = node.args[0].value if node.args and not node.args[0].star else MISSING
            found = self.classify(kind, scope, depth + 1) if kind is not MISSING else None
            if found is not None and found.kind is DeviceKind.CUDA and len(node.args) > 1:
                index = int_value(node.args[1].value)
                found = Device(DeviceKind.CUDA, index)
            return found or UNKNOWN
        if qualname in DEVICE_CALLS:
            return DEVICE_CALLS[qualname]
        if qualname == "str" and len(node.args) == 1:
            return self.classify(node.args[0].value, scope, depth + 1)
        export = self.functions.export(func, scope)
        if isinstance(export, Function):  # a function of another file of the project
            return export.returns.device if export.returns is not None else None
        called = self.functions.returned(func, scope)
        if called is not None:
            values, inner = called
            returned = [self.classify(r, inner, depth + 1) for r in values]
            known = [d for d in returned if d is not None]
            if known and len(known) == len(returned):
                return join_all(known)
        return None

    def _name(self, node: cst.Name | cst.Attribute, scope: Scope, depth: int) -> Device | None:
        symbol = scope.lookup_expr(node)
        if symbol is not None and symbol.bindings:
            return self._symbol(symbol, depth)
        option = self.values.option(node, scope)
        if option is not None:
            default = (
                self.classify(option.default, option.call.scope, depth + 1)
                if option.default is not None
                else None
            )
            return default.join(UNKNOWN) if default is not None else UNKNOWN
        if isinstance(node, cst.Attribute) and node.attr.value == "device":
            return UNKNOWN  # `tensor.device`, `module.device`, `accelerator.device`
        return None

    def named(self, node: cst.CSTNode, scope: Scope) -> Device | None:
        """`classify`, where a number is not a device: what a value passed elsewhere
        names (an int is a CUDA index only where a device is expected)."""
        self._numbers = False
        try:
            return self.classify(node, scope)
        finally:
            self._numbers = True

    def _symbol(self, symbol: Symbol, depth: int) -> Device | None:
        memo = self._symbols if self._numbers else self._named
        key = id(symbol)
        if key in memo:
            return memo[key]
        memo[key] = None  # while computing: a name defined through itself
        found: list[Device | None] = []
        for b in symbol.bindings:
            if b.kind is Kind.PARAM:
                passed = self.functions.arguments(b)
                outside = self.functions.passed(b)  # what the project's other files pass
                if passed is None and outside is None:
                    default = self.functions.default(b)
                    d = self.classify(*default, depth + 1) if default is not None else None
                    found.append(d.join(UNKNOWN) if d is not None else None)
                    continue
                found.extend(self.classify(v, where, depth + 1) for v, where in passed or ())
                if outside is not None:
                    found.append(outside.device)
            elif b.kind is Kind.ASSIGN and b.value is not None:
                found.append(self.classify(b.value, b.ctx.scope, depth + 1))
            elif b.kind is Kind.IMPORT and b.qualname is not None:
                found.append(self._imported(b.qualname))
            else:
                found.append(None)
        known = [d for d in found if d is not None]
        result = join_all(known)
        if result is not None and len(known) < len(found):
            result = result.join(UNKNOWN)  # other bindings we cannot read
        memo[key] = result
        return result

    def _imported(self, qualname: str) -> Device | None:
        """The device a module-level value of another file of the project names."""
        found = self.functions.env.export(qualname)
        return found.value.device if isinstance(found, Global) else None

    def tensor_type(self, node: cst.CSTNode, scope: Scope, _depth: int = 0) -> Device | None:
        """Where a legacy tensor type builds its tensors: `torch.cuda.FloatTensor` (CUDA),
        `torch.FloatTensor`/`torch.Tensor` (CPU), or a name bound only to such types
        (`Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`: CUDA with a CPU
        path). None for anything else."""
        if _depth > MAX_DEPTH:
            return None
        if isinstance(node, cst.IfExp):
            branches = [self.tensor_type(n, scope, _depth + 1) for n in (node.body, node.orelse)]
            known = [d for d in branches if d is not None]
            return join_all(known) if len(known) == 2 else None
        qualname = scope.resolve(node)
        if qualname is not None:
            head, _, name = qualname.rpartition(".")
            if head == "torch.cuda" and name in LEGACY_TENSOR_TYPES:
                return CUDA
            if head == "torch" and (name in LEGACY_TENSOR_TYPES or name == "Tensor"):
                return CPU
            return None
        symbol = scope.lookup_expr(node) if isinstance(node, cst.Name) else None
        if symbol is None or not symbol.bindings:
            return None
        found = [
            self.tensor_type(b.value, b.ctx.scope, _depth + 1)
            if b.kind is Kind.ASSIGN and b.value is not None
            else None
            for b in symbol.bindings
        ]
        known = [d for d in found if d is not None]
        return join_all(known) if len(known) == len(found) else None

    def not_a_device(self, node: cst.CSTNode, scope: Scope) -> bool:
        """Provably something else than a device: a dtype, a number, a tensor literal..."""
        if isinstance(node, (cst.Float, cst.Imaginary, cst.List, cst.Tuple, cst.Dict)):
            return True
        if isinstance(node, cst.Name) and node.value in ("None", "True", "False"):
            return True
        text = str_value(node)
        if text is not None:
            return _from_text(text) is None
        if isinstance(node, cst.Call):  # a tensor from a torch function: `.to(other)`
            called = scope.resolve(node.func) or ""
            return called.startswith("torch.") and called not in (*DEVICE_CALLS, "torch.device")
        if scope.resolve(node) in DTYPES:
            return True
        symbol = scope.lookup_expr(node)
        if symbol is not None and symbol.bindings:
            values = symbol.values()
            return len(values) == len(symbol.bindings) and all(
                self.not_a_device(v, b.ctx.scope)
                for v, b in zip(values, symbol.bindings, strict=True)
            )
        return False

    def move(self, call: CallSite) -> Device | None:
        """Where `x.cuda(...)` / `x.to(...)` / `x.cpu()` moves `x`: None when it is not a
        device move (`.to(torch.float16)`, `.to(other_tensor)`, `.to(memory_format=...)`).
        A `.to(expr)` whose expression is not known but could be a device is UNKNOWN; so is
        `x.type_as(other)` (Lightning's idiom: the device of another tensor)."""
        if call.method == "cpu":
            return None if call.node.args else CPU
        if call.method == "cuda":
            device = call.arg("device", index=0)
            if device is MISSING:
                return CUDA
            index = int_value(device)
            return Device(DeviceKind.CUDA, index) if index is not None else CUDA
        if call.method == "type_as":  # to the device (and dtype) of another tensor
            return UNKNOWN if len(call.node.args) == 1 and not call.node.args[0].star else None
        if call.method != "to":
            return None
        device = call.arg("device", index=0)
        if device is MISSING:
            return None
        found = self.classify(device, call.scope)
        if found is not None:
            return found
        return None if self.not_a_device(device, call.scope) else UNKNOWN

    def move_expression(self, call: CallSite) -> cst.BaseExpression | None:
        """The expression naming the device of a `.to(...)`/`.cuda(...)` (None for a bare
        `.cuda()`)."""
        device = call.arg("device", index=0)
        return None if device is MISSING else device
