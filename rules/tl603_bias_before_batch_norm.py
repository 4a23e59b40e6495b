"""TL603 bias-before-batch-norm: a layer's bias that the batch norm right after it cancels.

What: a convolution (`Conv1d/2d/3d`, `ConvTranspose*`) built with its bias (the default)
whose output goes straight into a `BatchNorm*d` / `SyncBatchNorm` (or an
`InstanceNorm*d`, which also subtracts a per-channel mean), or a `Linear` straight into
a `BatchNorm1d` of as many features. "Straight into": consecutive in
`nn.Sequential(...)`, in a list or tuple of layers (`[conv, bn, relu]`, returned by a
block helper), in two consecutive `layers.append(...)`, or, for layers held by a
module, `self.bn(self.conv(x))` or `x = self.conv(x)` followed by `x = self.bn(x)` at
every place the layer is called. Lists passed to another call (`nn.ModuleList([...])`,
whose order is not the order they run in) are not read, nor a block helper some call
of which is bound to a name whose items the file replaces (`self.out =
block(...)`, then `self.out[-1] = nn.Tanh()`: the norm may be gone there).

Why: batch norm subtracts the per-channel mean of its input, so a constant added to
each channel just before it is removed again: the bias changes nothing the network
computes, yet every forward pass adds it to the whole activation tensor (an extra
memory-bound pass over the layer's output) and every backward pass reduces a gradient
for it. The Performance Tuning Guide lists `bias=False` here among its general
optimizations; torchvision's models already build their layers this way. (Batch norm
in eval mode subtracts the running mean, which was learned with the bias in it: the
bias is just as useless there.)

Bad:
    block = nn.Sequential(
        nn.Conv2d(64, 128, 3, padding=1),
        nn.BatchNorm2d(128),
        nn.ReLU(inplace=True),
    )

Good:
    block = nn.Sequential(
        nn.Conv2d(64, 128, 3, padding=1, bias=False),
        nn.BatchNorm2d(128),
        nn.ReLU(inplace=True),
    )

Fix (unsafe): pass `bias=False` (offered where the bias is left to its default; an
explicit `bias=True` is reported without a fix). Unsafe because the layer's
`state_dict` loses its `bias` entry (loading an older checkpoint with `strict=True`
fails on the unexpected key), the random initialisation of every later layer shifts
(the bias no longer draws numbers), and a network that freezes the batch norm's
statistics while training the convolution (`bn.eval()` during fine-tuning) does use the
bias as a shift.

Impact: low for a `Linear` straight into a `BatchNorm1d`: `nn.Linear` adds its bias
inside the matrix multiply (`addmm`, the GEMM's epilogue), so the cancelled bias costs no
pass of its own forward, only a small reduction backward; low for a convolution of at
most 8 output channels (teaching networks on MNIST): a microsecond kernel. High for
other convolutions, whose bias is a separate broadcast add over the whole activation
tensor (cuDNN's convolution does not fuse it in training).

Unknown device: not read; the cancelled bias costs a pass over the activations, forward
and backward, on any device.

Sources: PyTorch Performance Tuning Guide, "Disable bias for convolutions directly
followed by a batch norm"; Ioffe and Szegedy, "Batch Normalization" (2015), section 3.2
(the bias "can be ignored since its effect will be canceled by the subsequent mean
subtraction"); `torch.nn.BatchNorm2d` docs.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator

import libcst as cst

from torchlint.edits import set_kwarg
from torchlint.fixes import Applicability, FixSafety, Replace, fix
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import (
    MISSING,
    CallSite,
    ModelSite,
    TorchModule,
    argument,
    assigned_to,
    bool_value,
    dotted_name,
)
from torchlint.text.walk import children, descendants

# Layers with a bias -> the position of `bias` among their positional parameters.
CONVOLUTIONS = {
    f"torch.nn.{kind}{dims}d": 7 for kind in ("Conv", "ConvTranspose") for dims in (1, 2, 3)
} | {f"torch.nn.Lazy{kind}{dims}d": 6 for kind in ("Conv", "ConvTranspose") for dims in (1, 2, 3)}
LINEAR = {"torch.nn.Linear": 2, "torch.nn.LazyLinear": 1}
FEW_CHANNELS = 8  # output channels: the bias add over a thin activation costs microseconds
LAYERS = CONVOLUTIONS | LINEAR
# Normalizations that subtract a per-channel mean, by what may precede them.
BATCH_NORM_1D = ("torch.nn.BatchNorm1d", "torch.nn.LazyBatchNorm1d", "torch.nn.SyncBatchNorm")
AFTER_CONVOLUTION = frozenset(BATCH_NORM_1D) | {
    f"torch.nn.{lazy}{kind}{dims}d"
    for lazy in ("", "Lazy")
    for kind in ("BatchNorm", "InstanceNorm")
    for dims in (1, 2, 3)
}
AFTER_LINEAR = frozenset(BATCH_NORM_1D)
SEQUENTIAL = "torch.nn.Sequential"
CALLED = AFTER_CONVOLUTION | set(LAYERS)
# What the file must show for the rule to have anything to say (model definitions are
# common; few have a norm straight after a layer): a layer's call (with neither
# `bias=False` nor `**options`), a comma and a norm; a
# norm appended to a list; or a norm assigned to an attribute and, in some `forward`, a
# module's output passed straight to another (`self.bn(self.conv(x))`, `x = self.conv(x)`
# then `x = self.bn(x)`).
_NORM = r"[\w.]*(?:Sync)?(?:BatchNorm|InstanceNorm)"
_CALL = r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"  # up to two levels of parentheses
_HELD = rf"(?s:.*?)self\.\w+\s*=\s*{_NORM}"
_CHAINED = (
    r"(?s:.*?)(?:self\.\w+\(\s*self\.\w+\("
    r"|\b(\w+)\s*=\s*self\.\w+\(\s*\1\s*\)\s*\n\s*\1\s*=\s*self\.\w+\(\s*\1\s*\))"
)
_SILENT = r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*?(?:\bbias\s*=\s*False|,\s*\*\*)"
PATTERN = re.compile(
    rf"(?:Conv(?:Transpose)?[123]d|Linear)(?!{_SILENT}){_CALL}\s*,\s*(?:#[^\n]*\s*)*{_NORM}"
    rf"|append\(\s*{_NORM}"
    rf"|\A(?={_HELD})(?={_CHAINED})"
)


class BiasBeforeBatchNorm(Rule):
    code = "TL603"
    name = "bias-before-batch-norm"
    fix_safety = FixSafety.UNSAFE
    tokens = ("BatchNorm", "InstanceNorm")
    pattern = PATTERN

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        layers = module.calls_to(*LAYERS)
        if not layers or not module.calls_to(*AFTER_CONVOLUTION):
            return  # (no normalization for a layer to feed)
        site_of = module.functions.site
        pairs = [*_in_sequences(module, layers, site_of), *_in_forward(module, site_of)]
        reported: set[int] = set()
        fixable: bool | None = None
        replaced: set[str] | None = None
        for layer, norm in sorted(pairs, key=lambda pair: pair[0].order):
            if id(layer.node) in reported or layer.has_star_args:
                continue  # `**options` may set the bias
            if not _cancelled(module, layer, norm):
                continue
            if replaced is None:
                replaced = _items_replaced(module.module)
            if replaced and _helper_result_changed(module, layer, replaced):
                continue  # `self.out = block(...)`, `self.out[-1] = nn.Tanh()`
            bias = layer.arg("bias", index=LAYERS[layer.qualname or ""])
            if bias is not MISSING and bool_value(bias) is not True:
                continue
            reported.add(id(layer.node))
            if fixable is None:
                fixable = not _reads_bias(module.module)
            kind = (layer.qualname or "").rsplit(".", 1)[-1]
            norm_kind = (norm.qualname or "").rsplit(".", 1)[-1]
            message = (
                f"the bias of this `{kind}` is cancelled by the `{norm_kind}` right after it "
                "(it subtracts the per-channel mean): it costs a pass over the activations "
                "in every forward and backward and changes nothing; pass `bias=False`"
            )
            low = _low(module, layer)
            yield self.diagnostic(
                layer.node,
                message if low is None else f"{message} (low impact: {low})",
                impact=Impact.HIGH if low is None else Impact.LOW,
                fix=None
                if bias is not MISSING or not fixable
                else fix(
                    "Pass `bias=False`",
                    Applicability.UNSAFE,
                    Replace(layer.node, set_kwarg(layer.node, "bias", cst.Name("False"))),
                ),
            )


def _low(module: TorchModule, layer: CallSite) -> str | None:
    """Why the cancelled bias costs next to nothing: a `Linear`'s bias is added in the
    matrix multiply's epilogue (cuBLAS/cuBLASLt `addmm`), not in a pass of its own; a
    convolution of a few output channels adds it over a thin activation."""
    if layer.qualname in LINEAR:
        return "a Linear adds its bias inside the matrix multiply (addmm): no pass of its own"
    found = argument(layer.node, "out_channels", ("in_channels", "out_channels"))
    channels = module.values.constant(found, layer.scope) if found is not MISSING else None
    if channels is not None and type(channels.value) is int and channels.value <= FEW_CHANNELS:
        return f"{channels.value} output channels: the add is a pass over a thin activation"
    return None


def _cancelled(module: TorchModule, layer: CallSite, norm: CallSite) -> bool:
    """The normalization removes the layer's bias: its kind follows the layer's, and a
    batch norm after a `Linear` normalizes the Linear's features (not a sequence axis)."""
    if layer.qualname in CONVOLUTIONS:
        return norm.qualname in AFTER_CONVOLUTION
    if norm.qualname not in AFTER_LINEAR:
        return False
    if norm.qualname == "torch.nn.LazyBatchNorm1d":
        return True
    lazy = layer.qualname == "torch.nn.LazyLinear"
    features = layer.arg("out_features", index=0 if lazy else 1)
    channels = norm.arg("num_features", index=0)
    if features is MISSING or channels is MISSING:
        return False
    if module.module.code_for_node(features) == module.module.code_for_node(channels):
        return True
    first, second = (
        module.values.constant(features, layer.scope),
        module.values.constant(channels, norm.scope),
    )
    return first is not None and second is not None and first.value == second.value


def _items_replaced(root: cst.Module) -> set[str]:
    """The names (`self.c7s1_3`) whose items the file assigns (`self.c7s1_3[-1] = ...`)."""
    return {
        name
        for node in descendants(root)
        if isinstance(node, cst.Assign)
        for target in node.targets
        if isinstance(target.target, cst.Subscript)
        and (name := dotted_name(target.target.value)) is not None
    }


def _helper_result_changed(module: TorchModule, layer: CallSite, replaced: set[str]) -> bool:
    """The layer is built by a helper function some call of which is bound to a name
    whose items the file replaces: the norm after it may be gone in that instance."""
    helper = layer.ctx.function
    if helper is None or layer.ctx.class_ is not None:
        return False
    return any(
        dotted_name(target) in replaced
        for call, _ in module.functions.callers(helper)
        for target in assigned_to(call)
    )


def _reads_bias(root: cst.Module) -> bool:
    """The file uses some module's `.bias` (`m.bias.data.zero_()`, `init.zeros_(m.bias)`)
    other than its own (`self.bias`) or in an `is None` test: code that fails once the
    bias is None."""
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(root, None)]
    while stack:
        node, parent = stack.pop()
        if (
            isinstance(node, cst.Attribute)
            and node.attr.value == "bias"
            and not (isinstance(node.value, cst.Name) and node.value.value == "self")
            and not isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.AssignTarget))
        ):
            return True
        stack.extend((child, node) for child in children(node))
    return False


# -- layers in a row ------------------------------------------------------------------

Site = Callable[[cst.CSTNode | None], CallSite | None]  # a call node's CallSite


def _in_sequences(
    module: TorchModule, layers: list[CallSite], site_of: Site
) -> Iterator[tuple[CallSite, CallSite]]:
    """(layer, next layer) built next to each other where order is run order:
    `nn.Sequential(...)` arguments, list and tuple literals (not passed to another
    call), two consecutive `x.append(...)` statements."""
    statements: dict[int, cst.BaseStatement] = {}
    for layer in layers:
        statement = layer.ctx.statement
        if statement is None:
            continue
        statements.setdefault(id(statement), statement)
        appended = _appended(statement, site_of)
        if appended is not None and appended[1] is layer:
            following = module.next_statement(statement)
            after = _appended(following, site_of) if following is not None else None
            if after is not None and after[0] == appended[0]:
                yield layer, after[1]
    for statement in statements.values():
        for row in _rows(statement, site_of):
            for first, second in itertools.pairwise(row):
                before, next_one = site_of(first), site_of(second)
                if before is not None and next_one is not None and before.qualname in LAYERS:
                    yield before, next_one


def _rows(statement: cst.CSTNode, site_of: Site) -> Iterator[list[cst.BaseExpression]]:
    """Runs of adjacent elements in one statement's `nn.Sequential(...)` calls and list
    and tuple literals (a starred element or a keyword ends a run)."""
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None, cst.CSTNode | None]] = [
        (statement, None, None)
    ]
    while stack:
        node, parent, grandparent = stack.pop()
        if isinstance(node, cst.Call):
            site = site_of(node)
            if site is not None and site.qualname == SEQUENTIAL:
                yield from _runs(
                    [(a.value, bool(a.star) or a.keyword is not None) for a in node.args]
                )
        elif isinstance(node, (cst.List, cst.Tuple)) and _in_order(parent, grandparent, site_of):
            yield from _runs([(e.value, isinstance(e, cst.StarredElement)) for e in node.elements])
        stack.extend((child, node, parent) for child in children(node))


def _in_order(parent: cst.CSTNode | None, grandparent: cst.CSTNode | None, site_of: Site) -> bool:
    """A literal's elements run in order unless it is passed to a call
    (`nn.ModuleList([...])`) other than `nn.Sequential(*[...])` or `layers.extend([...])`."""
    if not isinstance(parent, cst.Arg):
        return True
    site = site_of(grandparent)
    return site is not None and (site.qualname == SEQUENTIAL or site.method == "extend")


def _runs(items: list[tuple[cst.BaseExpression, bool]]) -> Iterator[list[cst.BaseExpression]]:
    run: list[cst.BaseExpression] = []
    for value, breaks in items:
        if breaks:
            yield run
            run = []
        else:
            run.append(value)
    yield run


def _appended(statement: cst.BaseStatement, site_of: Site) -> tuple[str, CallSite] | None:
    """`x.append(<call>)` as a whole statement: (the receiver's text, the appended call)."""
    call = site_of(_lone_value(statement))
    if call is None or call.method != "append" or len(call.node.args) != 1:
        return None
    receiver = dotted_name(call.receiver)
    appended = site_of(call.node.args[0].value)
    return (receiver, appended) if receiver is not None and appended is not None else None


def _lone_value(statement: cst.BaseStatement | None) -> cst.BaseExpression | None:
    """The expression of a one-expression statement line, or the value of a one-target
    assignment line."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if isinstance(small, cst.Expr):
        return small.value
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        return small.value
    return None


# -- layers held by a module ------------------------------------------------------------


def _in_forward(module: TorchModule, site_of: Site) -> Iterator[tuple[CallSite, CallSite]]:
    """Layers held by a module (`self.conv = nn.Conv2d(...)`) whose every call feeds one
    normalization straight away: `self.bn(self.conv(x))`, or `x = self.conv(x)` then
    `x = self.bn(x)`. Yields the constructions."""
    called: dict[int, list[CallSite]] = {}
    sites: dict[int, ModelSite] = {}
    for call in module.calls:
        site = module.models.called(call)
        if isinstance(site, ModelSite) and site.construction.qualname in CALLED:
            called.setdefault(id(site), []).append(call)
            sites[id(site)] = site
    wrapped: dict[int, CallSite] = {}  # id(inner call node) -> the normalization's call
    for key, found in called.items():
        if sites[key].construction.qualname in AFTER_CONVOLUTION:
            for call in found:
                if len(call.node.args) == 1 and len(call.positional) == 1:
                    wrapped[id(call.positional[0])] = call
    for key, found in called.items():
        site = sites[key]
        if site.construction.qualname not in LAYERS:
            continue
        norms = [wrapped.get(id(c.node)) or _normalized_next(module, c, site_of) for c in found]
        targets = {id(n): n for c in norms if c is not None and (n := module.models.called(c))}
        if len(targets) == 1 and all(n is not None for n in norms):
            target = next(iter(targets.values()))
            if isinstance(target, ModelSite):
                yield site.construction, target.construction


def _normalized_next(module: TorchModule, call: CallSite, site_of: Site) -> CallSite | None:
    """`x = layer(x)` whose next statement is `x = norm(x)`: the normalization's call."""
    statement = call.ctx.statement
    if _lone_value(statement) is not call.node or not isinstance(
        statement, cst.SimpleStatementLine
    ):
        return None
    assign = statement.body[0]
    if not isinstance(assign, cst.Assign):
        return None
    name = dotted_name(assign.targets[0].target)
    if name is None or [dotted_name(a) for a in call.positional] != [name]:
        return None
    following = module.next_statement(statement)
    norm = site_of(_lone_value(following))
    if norm is None or not isinstance(following, cst.SimpleStatementLine):
        return None
    if not isinstance(following.body[0], cst.Assign) or len(norm.node.args) != 1:
        return None
    if dotted_name(following.body[0].targets[0].target) != name:
        return None
    site = module.models.called(norm)
    if not isinstance(site, ModelSite) or site.construction.qualname not in AFTER_CONVOLUTION:
        return None
    return norm if [dotted_name(a) for a in norm.positional] == [name] else None
