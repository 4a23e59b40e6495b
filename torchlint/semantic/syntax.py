"""Pure helpers over CST expressions: names, literals, subtrees. No scopes, no facts."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any, cast

import libcst as cst

from torchlint.text.walk import children


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


# An argument that is not given (distinct from an explicit `None`).
MISSING: Any = _Missing()


# Tensor methods that read the data on the host: the CPU waits for the GPU to get there.
HOST_READS = frozenset({"item", "tolist", "cpu", "numpy"})

# Wrappers that hold a model and behave as it: `model = DataParallel(model)`.
MODULE_WRAPPERS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.compile",
        "torch.jit.script",
        "torch.nn.SyncBatchNorm.convert_sync_batchnorm",
        # PEFT: the adapter-wrapped model runs (and moves) as the model it is given.
        "peft.get_peft_model",
        "peft.prepare_model_for_kbit_training",
        "peft.PeftModel.from_pretrained",
    }
)
# Methods that return the module itself.
MODULE_CHAINING = frozenset(
    {"to", "cuda", "cpu", "train", "eval", "float", "half", "double", "bfloat16"}
)
MODULE_CHAINING |= {"requires_grad_", "share_memory", "type", "apply"}


def dotted_name(node: cst.CSTNode | None) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    # (By class, not `isinstance`: neither class has subclasses, and an `isinstance` that
    # fails goes through the ABC machinery; this runs for most expressions read.)
    if type(node) is cst.Name:
        return node.value
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def int_value(node: cst.CSTNode | None) -> int | None:
    """The value of an int literal (`32`, `-1`, `1_024`), else None."""
    if isinstance(node, cst.Integer):
        return int(node.value.replace("_", ""), 0)
    if (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    ):
        return -int(node.expression.value.replace("_", ""), 0)
    return None


def constant_index(node: cst.Subscript) -> int | None:
    """`k` of `value[k]`, a non-negative int literal (`value[-1]`: None)."""
    index = node.slice[0].slice if len(node.slice) == 1 else None
    found = int_value(index.value) if isinstance(index, cst.Index) else None
    return found if found is not None and found >= 0 else None


def bool_value(node: cst.CSTNode | None) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def is_none(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def str_value(node: cst.CSTNode | None) -> str | None:
    """The text of a plain string literal (implicit concatenation included), else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value: str | bytes | None
        if isinstance(node, cst.SimpleString) and "\\" not in node.value:
            value = node.evaluated_value
        else:  # an invalid escape (`"\d"`) warns: the user's compiler's to say
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def target_names(target: cst.BaseExpression) -> Iterator[str]:
    """The dotted names an assignment target binds (`x`, `self.out`, each of a tuple)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value)
    elif (name := dotted_name(target)) is not None:
        yield name


def names_read(node: cst.CSTNode) -> Iterator[str]:
    """Every name and dotted attribute chain in an expression (`a.b` gives `a.b`, then `a`)."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        name = dotted_name(node)
        if name is not None:
            yield name
    for child in children(node):
        yield from names_read(child)


def contains(root: cst.CSTNode, target: cst.CSTNode) -> bool:
    """`target` is `root` or inside it (identity; walks only `root`'s subtree)."""
    if root is target:
        return True
    return any(contains(child, target) for child in children(root))


def has_modulo(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
        return True
    return any(has_modulo(child) for child in children(node))


def positional(call: cst.Call) -> list[cst.BaseExpression]:
    """The positional arguments before any `*args`/keyword."""
    out = []
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            break
        out.append(arg.value)
    return out


def keyword(call: cst.Call, name: str) -> cst.BaseExpression:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return cast(cst.BaseExpression, MISSING)  # (MISSING is Any, to stand for any value)


def argument(
    call: cst.Call, name: str, params: tuple[str, ...] = (), index: int | None = None
) -> cst.BaseExpression:
    """The argument a call passes for parameter `name` (keyword, or positional at its index
    in `params` or at `index`), else MISSING. Positions after a `*args` are unknown."""
    value = keyword(call, name)
    if value is not MISSING:
        return value
    if index is None:
        if name not in params:
            return MISSING
        index = params.index(name)
    args = positional(call)
    return args[index] if index < len(args) else MISSING


# Methods that hand a tensor on with its first dimension as it is.
AS_IS_METHODS = frozenset({"to", "cuda", "float", "half", "detach", "type", "clone", "long"})


def handed_as_is(node: cst.BaseExpression) -> str | None:
    """The name a tensor expression hands on with its first dimension (`imgs.data`,
    `x.to(device)`, `Variable(imgs.type(Tensor))`); None for anything else."""
    while True:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute) and node.attr.value == "data":
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value not in AS_IS_METHODS:
                return None
            node = node.func.value
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "Variable"
            and len(node.args) >= 1
        ):
            node = node.args[0].value
        else:
            return None
