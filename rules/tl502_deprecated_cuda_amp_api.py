"""TL502 deprecated-cuda-amp-api: `torch.cuda.amp` / `torch.cpu.amp` are deprecated aliases.

What: calls of `torch.cuda.amp.autocast(...)`, `torch.cuda.amp.GradScaler(...)`,
`torch.cpu.amp.autocast(...)` and `torch.cpu.amp.GradScaler(...)`, however they are
imported (`from torch.cuda.amp import autocast, GradScaler`, `from torch.cuda import
amp`, aliases); and, once nothing uses them any more, the `from torch.cuda.amp
import ...` lines themselves.

Why: since PyTorch 2.4 these emit a `FutureWarning` on every call and are kept only
for compatibility; the device-generic `torch.autocast(device_type, ...)` and
`torch.amp.GradScaler(device, ...)` are the supported API, take the same arguments,
and make the device explicit (the same code then works for "cuda", "cpu", "xpu"...).

Bad:
    from torch.cuda.amp import GradScaler, autocast

    scaler = GradScaler()
    with autocast(dtype=torch.float16):
        loss = criterion(model(x), y)

Good:
    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)

Fix (safe): `torch.autocast("cuda", ...)` / `torch.amp.GradScaler("cuda", ...)`
("cpu" for `torch.cpu.amp`), positional arguments of the old `autocast` passed by
keyword (its first parameter was `enabled`, the new one's second is `dtype`); an
import left unused is then removed. The defaults are the same (float16 on CUDA,
bfloat16 on CPU), so results are unchanged. Gated by `target-torch`: nothing is
reported where the replacement does not exist yet (`torch.autocast` needs 1.10,
`torch.amp.GradScaler` 2.3), and a call on one side of a test of the torch version
(`new() if _TORCH_GREATER_EQUAL_2_4 else torch.cuda.amp.GradScaler()`, `if
hasattr(torch, "amp"): ... else: ...`) is left alone: it is there for older releases.

Impact: always low: `torch.autocast` and `torch.amp.GradScaler` run the same kernels as
the aliases, so the change removes a `FutureWarning` on every call and a break when the
aliases go, but makes no step faster. Shown (and fixed) with `--show-low-impact` or
`min-impact = "low"`: worth it before upgrading PyTorch.

Unknown device: not read; the deprecated names are reported wherever they are called,
and each replacement keeps the device its old name says (`torch.cuda.amp`: "cuda",
`torch.cpu.amp`: "cpu").

Sources: PyTorch AMP docs ("torch.cuda.amp.autocast(args...) is deprecated. Please
use torch.amp.autocast("cuda", args...) instead."); PyTorch 2.4 release notes.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.edits import spell
from torchlint.fixes import Applicability, FixSafety, Remove, Replace, fix
from torchlint.results import Impact
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import CallSite, TorchModule, dotted_name

AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")

# deprecated name -> (replacement, device, positional parameters to pass by keyword, since)
DEPRECATED: dict[str, tuple[str, str, tuple[str, ...], tuple[int, int]]] = {}
for _device in ("cuda", "cpu"):
    for _where in ("", ".autocast_mode"):
        DEPRECATED[f"torch.{_device}.amp{_where}.autocast"] = (
            "torch.autocast",
            _device,
            AUTOCAST_PARAMS,
            (1, 10),
        )
    for _where in ("", ".grad_scaler"):
        DEPRECATED[f"torch.{_device}.amp{_where}.GradScaler"] = (
            "torch.amp.GradScaler",
            _device,
            (),
            (2, 3),
        )
DEPRECATED_MODULES = {name.rsplit(".", 1)[0] for name in DEPRECATED}
# What a `from X import Y` line may import to count as the deprecated API.
DEPRECATED_IMPORTS = {*DEPRECATED, *DEPRECATED_MODULES}
# Why every finding is of low impact: the same kernels run under either name.
LOW = "low impact: the same kernels run; the change silences a FutureWarning"


class DeprecatedCudaAmpApi(Rule):
    code = "TL502"
    name = "deprecated-cuda-amp-api"
    fix_safety = FixSafety.SAFE
    # Every spelling: torch.cuda.amp.X, `from torch.cuda import amp`, `from torch import cuda`.
    tokens = ("cuda.amp", "cpu.amp", "cuda import", "cpu import")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        target = module.target_torch
        found: list[tuple[CallSite, str, str, tuple[str, ...]]] = []
        for qualname, (new_name, device, by_keyword, since) in DEPRECATED.items():
            if target is not None and target < since:
                continue
            found += [
                (call, new_name, device, by_keyword)
                for call in module.calls_to(qualname)
                if not module.runs.version_guarded(call)  # kept for older releases on purpose
            ]
        imports, unused = self._imports(module, [call for call, *_ in found])
        for call, new_name, device, by_keyword in found:
            old = (
                (module.resolve(call.node.func, call.scope) or "")
                .replace(".autocast_mode", "")
                .replace(".grad_scaler", "")
            )
            spelled, imp = spell(module, new_name, call.scope)
            new = _rewrite(call, cst.parse_expression(spelled), device, by_keyword)
            root = _root(call.node.func)
            removed = [Remove(stmt) for stmt, names in imports if root in names]
            yield self.diagnostic(
                call.node,
                f"`{old}(...)` is deprecated (a FutureWarning on every call since "
                f'PyTorch 2.4); use `{new_name}("{device}", ...)` ({LOW})',
                impact=Impact.LOW,
                fix=fix(
                    f'Use `{new_name}("{device}", ...)`'
                    + (" (and drop the import it leaves unused)" if removed else ""),
                    Applicability.SAFE,
                    Replace(call.node, new),
                    *removed,
                    imports=[imp] if imp else [],
                ),
            )
        for stmt in unused:
            yield self.diagnostic(
                stmt,
                f"unused import of the deprecated `torch.cuda.amp` / `torch.cpu.amp` API ({LOW})",
                impact=Impact.LOW,
                fix=fix("Remove the unused import", Applicability.SAFE, Remove(stmt)),
            )

    @staticmethod
    def _imports(
        module: TorchModule, calls: list[CallSite]
    ) -> tuple[list[tuple[cst.SimpleStatementLine, set[str]]], list[cst.SimpleStatementLine]]:
        """The `from torch.cuda.amp import ...` lines (the deprecated API only) that only the
        deprecated calls read, with the names they bind: each call's fix removes them
        with it (its own, or every other's too); and those nothing reads at all."""
        found: list[tuple[cst.SimpleStatementLine, set[str]]] = []
        for stmt in module.module.body:
            if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
                continue
            imp = stmt.body[0]
            if (
                not isinstance(imp, cst.ImportFrom)
                or imp.relative
                or imp.module is None
                or isinstance(imp.names, cst.ImportStar)
            ):
                continue
            base = dotted_name(imp.module)
            if not all(f"{base}.{dotted_name(a.name)}" in DEPRECATED_IMPORTS for a in imp.names):
                continue
            local = {
                a.asname.name.value
                if a.asname is not None and isinstance(a.asname.name, cst.Name)
                else dotted_name(a.name) or ""
                for a in imp.names
            }
            found.append((stmt, local))
        if not found:
            return [], []
        fixed = {id(_head(call.node.func)) for call in calls}  # the names the fixes rewrite
        symbols = module.scope.symbols
        reads = {n: symbols[n].references if n in symbols else [] for _, ns in found for n in ns}
        shared = [(s, names) for s, names in found if any(reads[n] for n in names)]
        return (
            [
                (s, names)
                for s, names in shared
                if all(id(read) in fixed for n in names for read in reads[n])
            ],
            [s for s, names in found if not any(reads[n] for n in names)],
        )


def _head(func: cst.BaseExpression) -> cst.BaseExpression:
    """The name (or other expression) a call's function is read through (`amp` in
    `amp.autocast`)."""
    while isinstance(func, cst.Attribute):
        func = func.value
    return func


def _root(func: cst.BaseExpression) -> str:
    """The name a call's function is read through (`amp` in `amp.autocast`)."""
    head = _head(func)
    return head.value if isinstance(head, cst.Name) else ""


def _rewrite(
    call: CallSite, func: cst.BaseExpression, device: str, by_keyword: tuple[str, ...]
) -> cst.Call:
    node = call.node
    args = list(node.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None or arg.star or i >= len(by_keyword):
            break
        args[i] = arg.with_changes(
            keyword=cst.Name(by_keyword[i]),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""),
                whitespace_after=cst.SimpleWhitespace(""),
            ),
        )
    ws = node.whitespace_before_args
    first = cst.Arg(cst.SimpleString(f'"{device}"'))
    if args:
        after: cst.BaseParenthesizableWhitespace = cst.SimpleWhitespace(" ")
        if isinstance(ws, cst.ParenthesizedWhitespace):
            # One argument per line: the device gets its own line (comments stay put).
            after = cst.ParenthesizedWhitespace(indent=ws.indent, last_line=ws.last_line)
        first = first.with_changes(comma=cst.Comma(whitespace_after=after))
    return node.with_changes(func=func, args=[first, *args])
