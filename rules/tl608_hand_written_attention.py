"""TL608 hand-written-attention: attention computed by hand instead of the fused kernel.

What: scaled dot-product attention written out in a function (a module's `forward`, an
`attention(q, k, v)` helper): a softmax over the last dimension of a product of a query
and a transposed key, then a product of those weights with the values. The product is
`q @ k.transpose(-2, -1)`, `torch.matmul`, `torch.bmm`, `.matmul`, or an einsum
(`torch.einsum`, einops' `einsum`) in the shape `"...qd,...kd->...qk"`, the key
transposed where it is multiplied or where it is bound (`.transpose`, `.mT`, `.T`,
`.permute(0, 2, 3, 1)`); scaled or not (`/ math.sqrt(d)`, `* self.scale`, the query or key
scaled beforehand), masked or not (`.masked_fill(...)`, `+ mask`, `torch.where`, in
place); the softmax is `F.softmax`, `torch.softmax`, `.softmax(-1)`, an
`nn.Softmax(dim=-1)` (of the module, or called at once) or a function of the project
named `softmax`, over dimension -1 (or the last one, where the rank is visible:
`torch.bmm`, a `permute`, an einsum); the weights may go through a dropout
(`self.attn_drop(attn)`, `F.dropout`), a cast or a head mask. In one expression or
across the statements of the function, as timm and minGPT write it:

    attn = (q @ k.transpose(-2, -1)) * self.scale
    attn = attn.softmax(dim=-1)
    attn = self.attn_drop(attn)
    x = attn @ v

Left alone: a softmax over another dimension, or of something that is not a query-key
product (additive attention, a graph attention's scores, logits); weights never
multiplied by values (an attention map); a file that calls
`scaled_dot_product_attention` (the hand-written path is its fallback, kept on purpose:
nanoGPT's `if self.flash:`, timm's `fused_attn`) or computes it on one side of a test of
the torch version; a project whose target torch is older than 2.0.

Why: written out, attention materialises the (L x L) matrix of scores for every head,
then writes and reads it again for the scale, the mask, the softmax and the dropout,
each a kernel of its own: memory traffic and memory that grow with the square of the
sequence length. `torch.nn.functional.scaled_dot_product_attention` (PyTorch 2.0)
dispatches to fused kernels (FlashAttention, memory-efficient attention) that compute
the same result tile by tile without ever storing the matrix: several times faster and
far less memory for long sequences, and the fallback is the same math.

Bad:
    class SelfAttention(nn.Module):
        def forward(self, q, k, v):
            attn = (q @ k.transpose(-2, -1)) * self.scale
            attn = attn.softmax(dim=-1)
            return attn @ v

Good:
    class SelfAttention(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v)

Fix: none offered. The call replaces several statements whose pieces map onto its
arguments in ways only the author can confirm: a boolean mask means "attend" where
`masked_fill(mask == 0, ...)` means "hide", an additive mask or bias is a float
`attn_mask`, a causal mask is `is_causal=True`; the dropout must become `dropout_p=p if
self.training else 0.0` (and draws other random numbers); a scale other than
`1/sqrt(q.size(-1))` is `scale=` (PyTorch 2.1). And the fused kernels round differently
in half precision: results differ in the last bits.

Impact: high. Low where the attention weights (or the scores) are also returned or
stored (`return x, attn`, `self.attn_map = attn`: to visualise them, to return them as
Hugging Face models do on request, Whisper's `qk` for its alignment heads): the fused
kernels do not produce them, so the hand-written path stays for when they are asked
for, and the change is a redesign (a `need_weights` flag, as `nn.MultiheadAttention`),
not a substitution. The sequence length is not read: it is rarely visible where
attention is written.

Unknown device: not read. The fused kernels are CUDA's first (FlashAttention and
memory-efficient attention), with fused CPU and MPS paths in recent releases; elsewhere
`scaled_dot_product_attention` runs the same math as the hand-written code, so it never
costs more.

Sources: PyTorch docs, `torch.nn.functional.scaled_dot_product_attention`; tutorial
"Implementing High-Performance Transformers with Scaled Dot Product Attention"; Dao et
al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import libcst as cst

from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    CallSite,
    TorchModule,
    dotted_name,
    int_value,
    keyword,
    positional,
    str_value,
)
from torchlint.text.walk import children

SDPA = "torch.nn.functional.scaled_dot_product_attention"
SOFTMAX = ("torch.nn.functional.softmax", "torch.softmax", "torch.Tensor.softmax")
SOFTMAX_MODULE = "torch.nn.Softmax"
MATMUL = ("torch.matmul", "torch.bmm", "torch.Tensor.matmul", "torch.Tensor.bmm")
EINSUM = ("torch.einsum", "einops.einsum")  # the spec first, or (einops) last
# Other libraries' softmax, not a function of the project named `softmax`.
FOREIGN = ("jax", "numpy", "scipy", "tensorflow", "mlx", "keras")
WHERE = "torch.where"
DROPOUT = "torch.nn.functional.dropout"
# Methods that keep what a tensor holds (scores stay scores, weights stay weights).
KEEPS = frozenset(
    {"float", "half", "bfloat16", "double", "to", "type", "type_as", "contiguous", "clone"}
)
RESHAPES = frozenset({"view", "reshape"})
SCALES = frozenset({"mul", "div", "mul_", "div_"})
MASKS = frozenset({"masked_fill", "masked_fill_", "add", "add_", "sub", "sub_"})
READS = frozenset({"shape", "dtype", "device", "size", "dim", "ndim"})  # not an escape
OWN = {"softmax", "transpose", "t", "permute", "matmul", "bmm"}
METHODS = KEEPS | RESHAPES | SCALES | MASKS | READS | OWN  # what `method` reads
# The rule can say something only where a key is transposed (or an einsum multiplies).
PATTERN = re.compile(r"transpose|permute|\.mT|\.T\b|\.t\(\)|einsum|bmm")

KT, SCORES, WEIGHTS = "kt", "scores", "weights"


@dataclass(eq=False)
class Leak:
    """The scores of one product, or the weights of their softmax, are returned or
    stored as well (what the fused kernels do not compute)."""

    escaped: bool = False


@dataclass(eq=False)
class Attention:
    """One softmax whose weights multiply values: what the finding says."""

    softmax: cst.Call
    query: cst.BaseExpression | None
    key: cst.BaseExpression | None
    leak: Leak
    value: cst.BaseExpression | None = None
    masked: bool = False
    dropout: bool = False
    used: bool = False  # the weights multiply values


@dataclass(frozen=True)
class Tag:
    """What a tensor expression holds: a transposed key, a query-key product (scores),
    or the softmax of one (weights)."""

    kind: str
    rank: int | None = None
    query: cst.BaseExpression | None = None
    key: cst.BaseExpression | None = None
    masked: bool = False
    attention: Attention | None = None
    leak: Leak | None = None


class HandWrittenAttention(Rule):
    code = "TL608"
    name = "hand-written-attention"
    tokens = ("softmax", "Softmax")
    pattern = PATTERN
    min_torch = (2, 0)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if module.calls_to(SDPA) or module.imports_any("flash_attn", "xformers"):
            return  # a fused path exists: the hand-written one is its fallback
        modules = _softmax_modules(module)
        functions: dict[int, cst.FunctionDef] = {}
        for call in module.calls:
            if (function := call.ctx.function) is not None and _softmax_call(call, modules):
                functions.setdefault(id(function), function)
        for function in functions.values():
            flow = Flow(module, modules)
            flow.block(function.body)
            for found in flow.found.values():
                site = module.functions.site(found.softmax)
                if found.used and not (site is not None and module.runs.version_guarded(site)):
                    yield self._finding(module, found)

    def _finding(self, module: TorchModule, found: Attention) -> Diagnostic:
        q = _spelled(module, found.query, "q")
        k = _spelled(module, found.key, "k")
        v = _spelled(module, found.value, "v")
        args = [q, k, v]
        if found.masked:
            args.append("attn_mask=...")
        if found.dropout:
            args.append("dropout_p=p if self.training else 0.0")
        message = (
            f"attention written by hand (softmax of `{q}` times `{k}` transposed, then "
            f"times `{v}`): the L x L matrix of scores is written to memory and read back "
            "by each of its steps; `torch.nn.functional.scaled_dot_product_attention("
            f"{', '.join(args)})` computes the same in one fused kernel (FlashAttention, "
            "memory-efficient attention) that never stores it (its scale is "
            "1/sqrt(q.size(-1)) unless given `scale=`"
            + ("; a causal mask is `is_causal=True`)" if found.masked else ")")
        )
        if found.leak.escaped:
            message += (
                " (low impact: the attention weights are returned or stored as well, "
                "which the fused kernels do not compute)"
            )
        impact = Impact.LOW if found.leak.escaped else Impact.HIGH
        return self.diagnostic(found.softmax, message, impact=impact)


def _spelled(module: TorchModule, node: cst.BaseExpression | None, default: str) -> str:
    if node is None:
        return default
    text = module.module.code_for_node(node)
    return text if len(text) <= 24 and "\n" not in text else default


def _softmax_modules(module: TorchModule) -> dict[str, list[cst.BaseExpression]]:
    """The names (`self.attend`, `softmax`) bound to an `nn.Softmax(dim)`: their dims."""
    found: dict[str, list[cst.BaseExpression]] = {}
    for call in module.calls_to(SOFTMAX_MODULE):
        binding = module.binding_of(call.node)
        if binding is not None:
            found.setdefault(binding.symbol.name, []).append(call.arg("dim", ("dim",)))
    return found


def _softmax_call(call: CallSite, modules: dict[str, list[cst.BaseExpression]]) -> bool:
    """A softmax, or what may be one: the functions holding none are not followed."""
    func = call.node.func
    if isinstance(func, cst.Call):  # `nn.Softmax(dim=-1)(scores)`
        func = func.func
    name = dotted_name(func) or ""
    return name.rpartition(".")[2] in ("softmax", "Softmax") or name in modules


def _own_softmax(func: cst.BaseExpression, qualname: str | None) -> bool:
    """`softmax(x, dim=-1)`: a function of the project named so (a course's own)."""
    return (
        isinstance(func, cst.Name)
        and func.value == "softmax"
        and not (qualname or "").startswith(FOREIGN)
    )


def _last_dim(dim: cst.BaseExpression | None, rank: int | None) -> bool:
    value = int_value(dim)
    return value == -1 or (rank is not None and value == rank - 1)


def _einsum(spec: str, words: bool) -> str | None:
    """SCORES for `"bhid,bhjd->bhij"` (the last axis of both inputs contracted, the
    output ending in the rows of each), WEIGHTS for `"bhij,bhjd->bhid"` (weights times
    values); axes are letters (einops: words), ellipses dropped."""
    inputs, arrow, output = spec.partition("->")
    parts = inputs.split(",")
    if not arrow or len(parts) != 2:
        return None
    a, b, out = (_axes(p, words) for p in (*parts, output))
    if min(len(a), len(b), len(out)) < 2 or a[-1] in out:
        return None
    if a[-1] == b[-1] and out[-2:] == (a[-2], b[-2]):
        return SCORES
    return WEIGHTS if a[-1] == b[-2] and out[-2:] == (a[-2], b[-1]) else None


def _axes(text: str, words: bool) -> tuple[str, ...]:
    text = text.replace("...", " ")
    return tuple(text.split()) if words else tuple(text.replace(" ", ""))


def _combined(op: cst.BaseBinaryOp, left: Tag | None, right: Tag | None) -> Tag | None:
    """What an arithmetic operation keeps: scores scaled (`scores * scale`, `scale *
    scores`) or masked (`scores + mask`), weights masked by head (`probs * head_mask`),
    a transposed key scaled (`k.permute(0, 2, 3, 1) * scale`)."""
    scales = isinstance(op, (cst.Multiply, cst.Divide))
    if left is not None and left.kind in (KT, SCORES, WEIGHTS) and scales:
        return left if left.kind != WEIGHTS or isinstance(op, cst.Multiply) else None
    if left is not None and left.kind == SCORES and isinstance(op, (cst.Add, cst.Subtract)):
        return replace(left, masked=True)
    if right is not None and right.kind == SCORES and isinstance(op, (cst.Multiply, cst.Add)):
        return right if isinstance(op, cst.Multiply) else replace(right, masked=True)
    return None


def _key_permuted(call: cst.Call) -> int | None:
    """`k.permute(0, 1, 3, 2)`, `k.permute(0, 2, 3, 1)`: the last dimension (the
    features) moved to the rows: the rank; else None."""
    dims = [int_value(a) for a in positional(call)]
    if len(dims) == 1 and isinstance(call.args[0].value, (cst.Tuple, cst.List)):
        dims = [int_value(e.value) for e in call.args[0].value.elements]
    n = len(dims)
    if n < 2 or None in dims or sorted(d for d in dims if d is not None) != list(range(n)):
        return None
    return n if dims[-2] == n - 1 else None


@dataclass
class Flow:
    """The tensors of one function followed statement by statement, in order: which
    names hold a transposed key, scores or attention weights."""

    module: TorchModule
    modules: dict[str, list[cst.BaseExpression]]
    env: dict[str, Tag] = field(default_factory=dict)
    found: dict[int, Attention] = field(default_factory=dict)

    # -- statements ------------------------------------------------------------------

    def block(self, body: cst.BaseSuite | cst.BaseStatement | None) -> None:
        if body is None:
            return
        if isinstance(body, cst.SimpleStatementSuite):
            for small in body.body:
                self.small(small)
        elif isinstance(body, cst.IndentedBlock):
            for statement in body.body:
                self.statement(statement)
        elif isinstance(body, cst.BaseStatement):
            self.statement(body)

    def statement(self, node: cst.BaseStatement) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self.small(small)
        elif isinstance(node, cst.If):
            self.read(node.test)
            before = dict(self.env)
            self.block(node.body)
            after, self.env = self.env, before
            if node.orelse is not None:
                self.block(node.orelse.body if isinstance(node.orelse, cst.Else) else node.orelse)
            for name, tag in after.items():
                other = self.env.get(name)
                if other is None or other.kind == tag.kind:
                    masked = tag.masked or (other is not None and other.masked)
                    self.env[name] = replace(tag, masked=masked)
        elif isinstance(node, (cst.For, cst.While)):
            self.read(node.iter if isinstance(node, cst.For) else node.test)
            self.block(node.body)
            self.block(node.orelse.body if node.orelse is not None else None)
        elif isinstance(node, cst.With):
            for item in node.items:
                self.read(item.item)
            self.block(node.body)
        elif isinstance(node, cst.Try):
            self.block(node.body)
            for handler in node.handlers:
                self.block(handler.body)
            for extra in (node.orelse, node.finalbody):
                self.block(extra.body if extra is not None else None)

    def small(self, node: cst.BaseSmallStatement) -> None:
        if isinstance(node, cst.Assign):
            tag = self.value(node.value)
            for target in node.targets:
                self.assign(target.target, tag)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self.assign(node.target, self.value(node.value))
        elif isinstance(node, cst.AugAssign):
            self.augment(node)
        elif isinstance(node, (cst.Expr, cst.Return)) and node.value is not None:
            self.read(node.value)
        else:
            for child in children(node):
                if isinstance(child, cst.BaseExpression):
                    self.read(child)

    def assign(self, target: cst.BaseExpression, tag: Tag | None) -> None:
        if isinstance(target, cst.Name):
            if tag is None:
                self.env.pop(target.value, None)
            else:
                self.env[target.value] = tag
            return
        self.escape(tag)  # `self.attn = attn`, `x, attn = ...`
        if isinstance(target, cst.Subscript):  # `scores[mask] = -inf`
            self.mask_in_place(target.value)
        for child in children(target):
            if isinstance(child, cst.Element):
                self.assign(child.value, None)

    def augment(self, node: cst.AugAssign) -> None:
        tag = self.value(node.value)
        self.escape(tag)
        target = node.target
        if not isinstance(target, cst.Name):
            self.read(target)
            return
        held = self.env.get(target.value)
        if held is not None and held.kind == SCORES:
            if isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
                self.env[target.value] = replace(held, masked=True)
            elif not isinstance(node.operator, (cst.MultiplyAssign, cst.DivideAssign)):
                self.env.pop(target.value)
        else:
            self.env.pop(target.value, None)

    def mask_in_place(self, node: cst.BaseExpression) -> None:
        if isinstance(node, cst.Name):
            held = self.env.get(node.value)
            if held is not None and held.kind == SCORES:
                self.env[node.value] = replace(held, masked=True)

    def escape(self, tag: Tag | None) -> None:
        """The scores or weights leave the attention: returned, stored, handed to a call."""
        if tag is not None and tag.leak is not None:
            tag.leak.escaped = True

    def read(self, node: cst.BaseExpression) -> None:
        """An expression whose value goes where the attention does not follow it."""
        self.escape(self.value(node))

    # -- expressions -----------------------------------------------------------------

    def value(self, node: cst.BaseExpression) -> Tag | None:
        """What `node` holds; every expression below it is read once."""
        if isinstance(node, cst.Name):
            return self.env.get(node.value)
        if isinstance(node, cst.BinaryOperation):
            return self.binary(node)
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, cst.Attribute):
            if node.attr.value in ("mT", "T"):
                self.read(node.value)
                return Tag(KT, key=node.value)
            if node.attr.value in READS:
                self.value(node.value)
                return None
        self.inside(node)
        return None

    def inside(self, node: cst.CSTNode) -> None:
        for child in children(node):
            if isinstance(child, cst.BaseExpression):
                self.read(child)
            elif not isinstance(child, (cst.BaseSuite, cst.BaseStatement)):
                self.inside(child)

    def binary(self, node: cst.BinaryOperation) -> Tag | None:
        op = node.operator
        if isinstance(op, cst.MatrixMultiply):
            return self.product(node.left, node.right, None)
        left, right = self.value(node.left), self.value(node.right)
        result = _combined(op, left, right)
        for held in (left, right):
            if result is None or held is None or held.leak is not result.leak:
                self.escape(held)  # what the result does not carry on
        return result

    def product(self, a: cst.BaseExpression, b: cst.BaseExpression, rank: int | None) -> Tag | None:
        """`a @ b`: scores where `b` is a transposed key, values weighted where `a` holds
        weights."""
        left, right = self.value(a), self.value(b)
        if right is not None and right.kind == KT and (left is None or left.kind != WEIGHTS):
            self.escape(left)
            known = rank or right.rank or (left.rank if left else None)
            return Tag(SCORES, known, query=a, key=right.key, leak=Leak())
        if self.weighted(left, right, b):
            return None
        self.escape(left)
        self.escape(right)
        return None

    def weighted(self, left: Tag | None, right: Tag | None, v: cst.BaseExpression) -> bool:
        """Weights times values: the attention is complete."""
        if left is None or left.kind != WEIGHTS or left.attention is None:
            return False
        self.escape(right)
        left.attention.used = True
        left.attention.value = left.attention.value or v
        return True

    def call(self, node: cst.Call) -> Tag | None:
        site = self.module.functions.site(node)
        qualname = site.qualname if site is not None else None
        if qualname in MATMUL:
            args = positional(node)
            if len(args) == 2:
                return self.product(args[0], args[1], 3 if qualname.endswith("bmm") else None)
        if qualname in EINSUM:
            return self.einsum(node, qualname == EINSUM[1])
        if qualname in SOFTMAX or _own_softmax(node.func, qualname):
            args = positional(node)
            operand = args[0] if args else keyword(node, "input")
            dim = args[1] if len(args) > 1 else keyword(node, "dim")
            return self.softmax(node, operand, dim)
        if qualname == WHERE:
            return self.where(node)
        func = node.func
        dims = self.modules.get(dotted_name(func) or "")
        if isinstance(func, cst.Call):  # `nn.Softmax(dim=-1)(scores)`
            inner = self.module.functions.site(func)
            if inner is not None and inner.qualname == SOFTMAX_MODULE:
                dims = [inner.arg("dim", ("dim",))]
        if dims is not None and len(node.args) == 1:
            return self.softmax(node, node.args[0].value, *dims)
        if isinstance(func, cst.Attribute) and qualname is None and func.attr.value in METHODS:
            return self.method(node, func.value, func.attr.value)
        return self.other(node, qualname)

    def method(self, node: cst.Call, receiver: cst.BaseExpression, name: str) -> Tag | None:
        if name == "softmax":
            args = positional(node)
            return self.softmax(node, receiver, args[0] if args else keyword(node, "dim"))
        if name in ("transpose", "t"):
            self.read(receiver)
            return Tag(KT, key=receiver)
        if name == "permute":
            rank = _key_permuted(node)
            self.value(receiver)
            return Tag(KT, rank, key=receiver) if rank is not None else None
        if name in ("matmul", "bmm") and len(node.args) == 1:
            return self.product(receiver, node.args[0].value, 3 if name == "bmm" else None)
        held = self.value(receiver)
        for arg in node.args:
            self.read(arg.value)
        if held is None:
            return None
        if name.endswith("_") and isinstance(receiver, cst.Name) and name in MASKS:
            self.mask_in_place(receiver)  # `scores.masked_fill_(mask, -inf)`
        if name in KEEPS or name in READS:
            return held if name in KEEPS else None
        if name in RESHAPES:
            star = any(a.star for a in node.args)
            return replace(held, rank=None if star else len(node.args) or None)
        if held.kind == KT:
            return None
        if held.kind == SCORES and name in SCALES:
            return held
        if held.kind == SCORES and name in MASKS:
            return replace(held, masked=True)
        self.escape(held)
        return None

    def other(self, node: cst.Call, qualname: str | None) -> Tag | None:
        """A dropout of the weights keeps them; any other call takes them away."""
        if isinstance(node.func, cst.Attribute):
            self.read(node.func.value)
        args = [self.value(a.value) for a in node.args]
        first = args[0] if args else None
        name = (dotted_name(node.func) or "").rpartition(".")[2].lower()
        if (
            first is not None
            and first.kind == WEIGHTS
            and first.attention is not None
            and (qualname == DROPOUT or "drop" in name or "dropout" in (qualname or ""))
        ):
            first.attention.dropout = True
            for held in args[1:]:
                self.escape(held)
            return first
        for held in args:
            self.escape(held)
        return None

    def softmax(
        self, node: cst.Call, operand: cst.BaseExpression, *dims: cst.BaseExpression
    ) -> Tag | None:
        """A softmax of scores over the last dimension (every `dim` it may be given)."""
        held = self.value(operand)
        for arg in node.args:
            if arg.value is not operand:
                self.read(arg.value)
        if held is None or held.kind != SCORES or not all(_last_dim(d, held.rank) for d in dims):
            self.escape(held)
            return None
        found = self.found.get(id(node))
        if found is None:
            leak = held.leak or Leak()
            found = Attention(node, held.query, held.key, leak, masked=held.masked)
            self.found[id(node)] = found
        return Tag(WEIGHTS, held.rank, attention=found, leak=found.leak)

    def einsum(self, node: cst.Call, spec_last: bool) -> Tag | None:
        args = positional(node)
        if spec_last and args:
            args = [args[-1], *args[:-1]]
        spec = str_value(args[0]) if args else None
        if spec is None or len(args) != 3:
            self.inside(node)
            return None
        shape = _einsum(spec, spec_last)
        a, b = self.value(args[1]), self.value(args[2])
        if shape == WEIGHTS and self.weighted(a, b, args[2]):
            return None
        self.escape(a)
        self.escape(b)
        if shape == SCORES:
            out = spec.partition("->")[2]
            rank = None if "..." in out else len(_axes(out, spec_last))
            return Tag(SCORES, rank, query=args[1], key=args[2], leak=Leak())
        return None

    def where(self, node: cst.Call) -> Tag | None:
        """`torch.where(mask, scores, -inf)`: masked scores."""
        tags = [self.value(a.value) for a in node.args]
        for held in tags:
            if held is not None and held.kind == SCORES:
                return replace(held, masked=True)
            self.escape(held)
        return None
