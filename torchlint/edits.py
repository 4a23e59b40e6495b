"""Builders of the CST that fixes put in: arguments set or removed in a call's own
layout, dotted names, the module-level definitions several rules share, and the edits
built from the facts of a file (`semantic/` computes those facts, never a fix)."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from torchlint.fixes import Applicability, Definition, Fix, Import, Replace, fix
from torchlint.semantic import (
    DATALOADER_PARAMS,
    MISSING,
    CallSite,
    DataLoaderSite,
    DeviceKind,
    Loader,
    Scope,
    TorchModule,
    argument,
    blocking_copies,
    bool_value,
    device_object,
    dotted_name,
    int_value,
    keyword,
)

# A one-line call that grows longer than this (the call alone: its line holds more) is
# laid out one argument per line with a trailing comma, as black and ruff format it.
WRAP_AT = 72
_EMPTY = cst.Module(body=[])


def set_kwarg(
    call: cst.Call,
    name: str,
    value: cst.BaseExpression,
    positional: Sequence[str] = (),
) -> cst.Call:
    """`call` with argument `name` replaced or added, following the call's layout."""
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            args[i] = a.with_changes(value=value)
            return call.with_changes(args=args)
    if name in positional:
        index = positional.index(name)
        if index < len(args) and all(a.keyword is None and not a.star for a in args[: index + 1]):
            args[index] = args[index].with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    if not args:
        return call.with_changes(args=[new])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # Trailing comma: one argument per line (or a deliberate trailing comma); the new
        # argument takes the last one's place in the layout and keeps the trailing comma.
        between = (
            args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else None
        )
        if between is None:
            ws = call.whitespace_before_args
            if isinstance(ws, cst.ParenthesizedWhitespace):  # the line break, not its comment
                ws = ws.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[])
            between = cst.Comma(
                whitespace_after=ws
                if isinstance(ws, cst.ParenthesizedWhitespace)
                else cst.SimpleWhitespace(" ")
            )
        args[-1] = last.with_changes(comma=between)
        args.append(new.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        args.append(new.with_changes(whitespace_after_arg=last.whitespace_after_arg))
        grown = call.with_changes(args=args)
        code = _EMPTY.code_for_node(grown)
        if len(code) > WRAP_AT and "\n" not in code:
            return _one_argument_per_line(grown)
    return call.with_changes(args=args)


def _line_break(indent: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), indent=True, last_line=cst.SimpleWhitespace(indent)
    )


def _one_argument_per_line(call: cst.Call) -> cst.Call:
    args = [
        a.with_changes(
            comma=cst.Comma(whitespace_after=_line_break("    " if i < len(call.args) - 1 else "")),
            whitespace_after_arg=cst.SimpleWhitespace(""),
        )
        for i, a in enumerate(call.args)
    ]
    return call.with_changes(whitespace_before_args=_line_break("    "), args=args)


def remove_kwarg(call: cst.Call, name: str) -> cst.Call:
    """`call` without keyword argument `name` (layout of the rest kept)."""
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == name:
            if i == len(args) - 1 and i > 0:
                prev = args[i - 1]
                args[i - 1] = prev.with_changes(
                    comma=a.comma, whitespace_after_arg=a.whitespace_after_arg
                )
            del args[i]
            return call.with_changes(args=args)
    return call


def expression(dotted: str) -> cst.BaseExpression:
    """`a.b.c` as a Name/Attribute chain (no parser round trip)."""
    head, *rest = dotted.split(".")
    node: cst.BaseExpression = cst.Name(head)
    for part in rest:
        node = cst.Attribute(node, cst.Name(part))
    return node


def lone_expression(
    statement: cst.CSTNode | None, node: cst.BaseExpression
) -> cst.SimpleStatementLine | None:
    """The statement line when it is exactly the expression `node` (a call made for its
    effect), the line a fix may remove."""
    if (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and statement.body[0].value is node
    ):
        return statement
    return None


def code(node: cst.CSTNode) -> str:
    """The source text of a node (outside its module: default whitespace conventions)."""
    return _EMPTY.code_for_node(node)


# DataLoader worker processes, shared by every rule whose fix adds workers.
WORKERS_NAME = "NUM_WORKERS"
WORKERS_DEFINITION = Definition(
    WORKERS_NAME,
    "# DataLoader worker processes: the CPU cores this process may use, shared by the\n"
    "# processes torchrun starts on this machine, minus one for the main process.\n"
    '_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") '
    "else os.cpu_count() or 1\n"
    f'{WORKERS_NAME} = max(1, _CPUS // int(os.environ.get("LOCAL_WORLD_SIZE", "1")) - 1)\n',
)

# The GPU has bfloat16 tensor cores: CUDA compute capability 8.0 (Ampere) or newer.
# `torch.cuda.is_bf16_supported()` (and Transformers' `is_torch_bf16_gpu_available()`)
# also say yes on a T4 or V100, where bfloat16 is emulated and no faster than float32.
AMPERE = "torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8"


def spell(
    module: TorchModule, qualname: str, scope: Scope | None = None
) -> tuple[str, Import | None]:
    """How to write `qualname` in this file at `scope`, and the import it needs: its
    top-level module where no import visible there binds it."""
    spelled = module.spelling(qualname, scope)
    if spelled is not None:
        return spelled, None
    return qualname, Import(qualname.split(".")[0])


def set_arg(loader: DataLoaderSite, name: str, value: cst.BaseExpression) -> cst.Call | None:
    """The loader's call with parameter `name` set to `value` (keeping its position if
    any); None when the `**` dict sets it: a keyword too would raise TypeError. A loader
    factory's call: the factory's own parameter its entry names for `name`, as a keyword
    where the entry names it so, in its place where it gives a position and the call
    passes it; None otherwise (never a DataLoader keyword the factory may not take)."""
    if loader.factory is not None:
        where = loader.factory.parameter(name)
        if isinstance(where, str):
            return set_kwarg(loader.call.node, where, value)
        if where is None or loader.arg(name) is MISSING:
            return None
        return set_kwarg(loader.call.node, name, value, positional=("",) * where + (name,))
    direct = argument(loader.call.node, name, DATALOADER_PARAMS)
    if direct is MISSING and loader.spread is not None and name in loader.spread:
        return None
    return set_kwarg(loader.call.node, name, value, positional=DATALOADER_PARAMS)


def workers_fix(
    loader: DataLoaderSite,
    title: str,
    persistent: bool = False,
    pin: tuple[str, Import | None] | None = None,
    copies: tuple[list[Replace], list[Import]] = ([], []),
) -> Fix | None:
    """Set `num_workers=NUM_WORKERS`, the constant defined once after the imports; and
    `persistent_workers=True` with it where the loader would restart them (`persistent`,
    as the caller knows), the edit TL203 would otherwise ask for next; and, given `pin`
    (`pin_with_workers`), `pin_memory=<it>()` with the `copies` of its batches made
    non-blocking (`pinned_copies`): with workers, pinning is TL202's half of the same
    change, and its copies TL105's."""
    call = set_arg(loader, "num_workers", cst.Name(WORKERS_NAME))
    if call is None:
        return None
    parts = [title]
    if persistent and loader.factory is None and loader.arg("persistent_workers") is MISSING:
        call = set_kwarg(call, "persistent_workers", cst.Name("True"))
        parts.append("`persistent_workers=True`")
    imports = [Import("os")]
    edits: list[Replace] = []
    if pin is not None:
        call = set_kwarg(call, "pin_memory", cst.parse_expression(f"{pin[0]}()"))
        parts.append(f"`pin_memory={pin[0]}()`")
        imports += [pin[1]] if pin[1] is not None else []
        edits, needed = copies
        imports += needed
    title = " and ".join([", ".join(parts[:-1]), parts[-1]]) if len(parts) > 1 else title
    if edits:
        title += " (the copies of its batches made non-blocking)"
    return fix(
        title,
        Applicability.UNSAFE,
        Replace(loader.call.node, call),
        *edits,
        imports=imports,
        definitions=[WORKERS_DEFINITION],
    )


def pinned_by_workers_fix(module: TorchModule, loader: Loader) -> bool:
    """TL201's fix will pin the loader with the workers it gives it: no workers yet, TL201
    asks for them with high impact, nothing stops them starting, and the fix can be
    written. A batch move another fix adds then copies from pinned memory."""
    if not isinstance(loader, DataLoaderSite):
        return False  # built in another file: its own file's fixes decide
    workers = loader.arg("num_workers")
    if workers is not MISSING and int_value(workers) != 0:
        return False
    datasets = module.datasets
    if not datasets.wants_workers(loader) or datasets.workers_hazard(loader) is not None:
        return False
    persistent = module.restarts_workers(loader)
    pin = pin_with_workers(module, loader, persistent)
    return pin is not None and workers_fix(loader, "", persistent, pin) is not None


def pin_with_workers(
    module: TorchModule, loader: DataLoaderSite, persistent: bool
) -> tuple[str, Import | None] | None:
    """What the workers fix pins the loader with (TL202's `torch.cuda.is_available`, as
    spelled here, and its import), where it does not pin: no `pin_memory`, or `False` as a
    keyword of the call (not in a `**` dict, where a keyword as well would raise). None
    where it pins, a value says how, or a Lightning Trainer reloads the loaders it makes
    persistent (Lightning advises against pinning there)."""
    if loader.factory is not None or (persistent and module.frameworks.reloads_loaders):
        return None  # a factory's call: its pinning is not the workers fix's to add
    if loader.arg("pin_memory") is not MISSING and (
        bool_value(keyword(loader.call.node, "pin_memory")) is not False
    ):
        return None
    return spell(module, "torch.cuda.is_available", loader.call.scope)


def pinned_copies(
    module: TorchModule, loader: DataLoaderSite
) -> tuple[list[Replace], list[Import]]:
    """The copies of the loader's batches that pinning makes worth doing without blocking
    (TL105's), each with the `non_blocking=` it may take on every device (and the imports
    those need): one change with the pinning, not a finding it would bring about."""
    edits: list[Replace] = []
    imports: list[Import] = []
    for loop in [] if module.placement.managed else loader.loops:
        if not all(other is loader or module.loaders.pins_memory(other) for other in loop.loaders):
            continue
        for copy in blocking_copies(module, loop):
            found = non_blocking(module, copy)
            if found is None or any(e.node is copy.node for e in edits):
                continue
            edits.append(Replace(copy.node, set_kwarg(copy.node, "non_blocking", found[0])))
            imports += [found[1]] if found[1] is not None else []
    return edits, imports


def non_blocking(
    module: TorchModule, call: CallSite
) -> tuple[cst.BaseExpression, Import | None] | None:
    """The `non_blocking=` value that keeps a host-to-device copy's results on every
    device it may go to (and the import it needs): `True` where that is CUDA (or the CPU,
    where it does nothing). Where the device is chosen at run time (an accelerator, a
    `--device` option whatever its default, a rank) and a name holds it, a value true on
    CUDA only, `device.type == "cuda"` (`torch.device(rank).type == "cuda"` for what may
    be a string or an index): a non-blocking copy to MPS may read its source after it is
    freed. None where the destination is not a name."""
    found = module.devices.move(call)
    if found is None or found.is_cpu:
        return None
    if found.kind is DeviceKind.CUDA and not found.unknown_path:
        return cst.Name("True"), None
    device = module.devices.move_expression(call)
    name = dotted_name(device) if device is not None else None
    if device is None or name is None:
        return None
    if device_object(module, device, call.scope):
        return cst.parse_expression(f'{name}.type == "cuda"'), None
    spelled, imp = spell(module, "torch.device", call.scope)
    return cst.parse_expression(f'{spelled}({name}).type == "cuda"'), imp


def move_statement(
    module: TorchModule, name: str, move: CallSite, pinned: bool
) -> tuple[str, Import | None]:
    """`name = name.to(<the device of `move`>)` (`.cuda()` for a `.cuda()` move), and
    the import it needs: non-blocking from pinned memory where that is safe on every
    device the copy may go to (`non_blocking`)."""
    device = module.devices.move_expression(move)
    args = [module.module.code_for_node(device)] if device is not None else []
    found = non_blocking(module, move) if pinned else None
    if found is not None:
        args.append(f"non_blocking={module.module.code_for_node(found[0])}")
    method = "cuda" if move.method == "cuda" else "to"
    return f"{name} = {name}.{method}({', '.join(args)})\n", found[1] if found else None
