"""Which expressions hold a tensor's data, given the names known to hold tensors, and
which strings format it: converting or formatting such a value reads it on the host."""

from __future__ import annotations

import libcst as cst

from torchlint.semantic.syntax import HOST_READS, dotted_name

# Reading these never waits for the GPU.
METADATA_ATTRS = frozenset({
    "shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "layout", "grad_fn",
})  # fmt: skip
METADATA_METHODS = frozenset({
    "size", "dim", "numel", "nelement", "element_size", "get_device", "is_contiguous",
    "stride", "data_ptr", "type",
})  # fmt: skip
# Torch functions of tensors that give a Python value (their call is the read).
HOST_VALUED = frozenset({
    "is_tensor", "numel", "equal", "allclose", "is_nonzero", "is_floating_point",
    "is_complex", "is_same_size",
})  # fmt: skip


def tensor_valued(node: cst.BaseExpression, tensors: set[str]) -> bool:
    """The value of the expression is (built from) one of the tensors: `loss`,
    `out.argmax(1)`, `(pred == y).sum()`, `loss * 2`. `loss.shape`, `len(out)`,
    `loss.item()` are not (a host read is reported where it is written)."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        name = dotted_name(node)
        if name is not None and (name in tensors or name.split(".")[0] in tensors):
            return not (isinstance(node, cst.Attribute) and node.attr.value in METADATA_ATTRS)
        return False
    if isinstance(node, cst.Subscript):
        return tensor_valued(node.value, tensors)
    if isinstance(node, cst.BinaryOperation):
        return tensor_valued(node.left, tensors) or tensor_valued(node.right, tensors)
    if isinstance(node, cst.UnaryOperation):
        return tensor_valued(node.expression, tensors)
    if isinstance(node, cst.Comparison):  # `(pred == y).sum()`: a tensor of booleans
        parts = [node.left, *(c.comparator for c in node.comparisons)]
        return any(tensor_valued(part, tensors) for part in parts)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method in HOST_READS or (method in METADATA_METHODS and not _cast(node)):
            return False
        if (dotted_name(node.func) or "").startswith("torch."):
            # `torch.cat((lbox, lobj))`, `torch.stack(losses)`: a tensor of tensors
            return method not in HOST_VALUED and any(
                tensor_valued(v, tensors) for a in node.args for v in _elements(a.value)
            )
        return tensor_valued(node.func.value, tensors)
    return False


def _elements(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values of a tuple or list display, or the expression itself."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return [e.value for e in node.elements]
    return [node]


def formats_tensor(node: cst.BaseExpression, tensors: set[str]) -> bool:
    """A string formatted from one of the tensors: `f"{loss:.3f}"`, `"%g" % loss`,
    `("%10.4g" * 3) % (*mloss,)`, `"{}".format(loss)`: formatting a tensor converts it
    (`float`, `str`), which copies its data to the host."""
    if isinstance(node, cst.FormattedString):
        return any(
            isinstance(part, cst.FormattedStringExpression)
            and tensor_valued(part.expression, tensors)
            for part in node.parts
        )
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
        if not _string(node.left):
            return False
        return any(tensor_valued(v, tensors) for v in _elements(node.right))
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "format"
    ):
        return any(tensor_valued(a.value, tensors) for a in node.args)
    return False


def _string(node: cst.BaseExpression) -> bool:
    """A string literal, or one built of literals (`"%11s" * 2 + "%11.4g" * 5`)."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return _string(node.left) or _string(node.right)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return _string(node.left) and _string(node.right)
    return False


def _cast(node: cst.Call) -> bool:
    """`x.type(torch.float32)`: a cast (a tensor), where `x.type()` is its type's name."""
    return (
        isinstance(node.func, cst.Attribute) and node.func.attr.value == "type" and bool(node.args)
    )
