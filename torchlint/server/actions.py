"""Code actions: those listed for a range of a document, from its last lint (a quick fix
and an "ignore" per finding, "fix all"), and the edit of the one the user picks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsprotocol import types

from torchlint.semantic.external import Environment
from torchlint.server import analysis
from torchlint.server.shapes import Analysis, workspace_edit

FIX_ALL = "source.fixAll.torchlint"
FIX_ALL_TITLE = "Fix all safe torchlint problems"
FIX_ALL_UNSAFE_TITLE = "Fix all torchlint problems (unsafe fixes included)"


def listed(
    result: Analysis, params: types.CodeActionParams, key: str, resolves: bool
) -> list[types.CodeAction]:
    """The actions for `params`' range of the document `key` (a notebook's, or its own
    URI), without their edits (`data` says which edit)."""
    uri, only = params.text_document.uri, params.context.only
    base = {"key": key, "generation": result.snapshot.generation, "uri": uri}
    actions: list[types.CodeAction] = []
    if wanted(types.CodeActionKind.QuickFix, only):
        actions += _quick_fixes(result, params, base)
    # "fix all" is for the asking, or (clients that resolve) offered with the others:
    # computing its edit for every cursor move would cost a whole fix each time.
    if (only is not None or resolves) and wanted(FIX_ALL, only):
        chosen = result.setup
        assert chosen is not None
        fixable = any(
            v.fix is not None and analysis.offered(v, chosen)
            for pairs in result.findings.values()
            for v, _ in pairs
        )
        if fixable:
            title = FIX_ALL_UNSAFE_TITLE if chosen.unsafe else FIX_ALL_TITLE
            actions.append(
                types.CodeAction(title=title, kind=FIX_ALL, data={**base, "action": "fixAll"})
            )
    return actions


def _quick_fixes(
    result: Analysis, params: types.CodeActionParams, base: dict[str, Any]
) -> list[types.CodeAction]:
    """The fixes of the findings in the range, then an "ignore" for each."""
    chosen = result.setup
    assert chosen is not None
    first, last = params.range.start.line, params.range.end.line
    fixes: list[types.CodeAction] = []
    ignores: list[types.CodeAction] = []
    for v, diagnostic in result.findings[params.text_document.uri]:
        if v.end_line - 1 < first or v.line - 1 > last:
            continue
        where = {"code": v.code, "line": v.line, "column": v.column}
        if v.fix is not None and analysis.offered(v, chosen):
            fixes.append(
                types.CodeAction(
                    title=f"{v.code}: {v.fix.title} ({v.fix.applicability} fix)",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=v.fix.applicability == "safe",
                    data={**base, **where, "action": "fix"},
                )
            )
        ignores.append(
            types.CodeAction(
                title=f"Ignore {v.code} for this line",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                data={**base, **where, "action": "ignore"},
            )
        )
    return fixes + ignores


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether a code action of `kind` is asked for (`only` names kinds or their parents)."""
    return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)


def edit(
    result: Analysis,
    data: dict[str, Any],
    encoding: str,
    versioned: bool,
    buffers: analysis.Buffers,
    env: Environment | None,
) -> types.WorkspaceEdit | None:
    """(worker thread) The edit of the action `data` describes, from the engine (`env`:
    what the document's project tells it)."""
    snapshot, chosen = result.snapshot, result.setup
    assert chosen is not None
    kind, code = data["action"], data.get("code", "")
    new: dict[int, str | None] = {}
    index = snapshot.uris.index(data["uri"]) if data.get("uri") in snapshot.uris else 0
    if kind == "ignore":
        new[index] = analysis.ignore(snapshot.texts[index], data["line"], code)
    elif snapshot.cells is None:
        text = snapshot.texts[0]
        if kind == "fixAll":
            new[0] = analysis.fix_all_python(text, snapshot.name, chosen, env)
        else:
            key = (code, data["line"], data["column"])
            buffer = buffers.get(snapshot.key)
            new[0] = analysis.fix_python(text, snapshot.name, chosen, key, buffer, env)
    else:
        cells, name = snapshot.cells, snapshot.name
        if kind == "fixAll":
            sources = analysis.fix_all_cells(cells, name, chosen, env)
        else:
            key4 = (code, index + 1, data["line"], data["column"])
            buffer = buffers.get(snapshot.key)
            sources = analysis.fix_cells(cells, name, chosen, key4, buffer, env)
        new = dict(enumerate(sources or []))
    return workspace_edit(snapshot, new, encoding, versioned)
