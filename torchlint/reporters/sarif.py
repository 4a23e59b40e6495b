"""SARIF 2.1.0 for code scanning (GitHub, Azure DevOps, IDE viewers).

One run: `tool.driver` describes every rule (from its docstring) and the records of
files that could not be checked (TL000...: results of level error, and notifications),
each result points into a file by a URI relative to the repository root, columns count
code points, and fixes carry the edits of the fix.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from torchlint import __version__
from torchlint.registry import all_rules, family, find
from torchlint.reporters import (
    TOOL_URL,
    Context,
    cell_prefix,
    fingerprints,
    is_error,
    low_impact,
    repo_path,
    rule_url,
)
from torchlint.results import (
    ANALYSIS_ERROR,
    ERROR_NAMES,
    INVALID_SYNTAX,
    IO_ERROR,
    RULE_ERROR,
    FileResult,
    FixRecord,
    Violation,
)
from torchlint.rule import Rule

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT = "torchlint/v1"
_LABEL = re.compile(r"^([A-Z][\w ]*(?:\([\w ]+\))?):\s*(.*)$")


def doc_markdown(doc: str) -> str:
    """A rule docstring as Markdown: `Label:` paragraphs in bold, indented code fenced."""
    out: list[str] = []
    code: list[str] = []
    start_of_paragraph = True

    def flush() -> None:
        if code:
            out.extend(["", "```python", *code, "```", ""])
            code.clear()

    for line in doc.splitlines()[1:]:
        if line.startswith("    ") and (code or start_of_paragraph or out[-1].endswith(":**")):
            code.append(line[4:])
            continue
        flush()
        match = _LABEL.match(line) if start_of_paragraph else None
        out.append(f"**{match[1]}:** {match[2]}".rstrip() if match else line)
        start_of_paragraph = not line.strip()
    flush()
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def _paragraph(doc: str, label: str) -> str | None:
    for block in doc.split("\n\n"):
        if block.startswith(label + ":"):
            return " ".join(block[len(label) + 1 :].split())
    return None


def rule_descriptor(rule: type[Rule]) -> dict[str, Any]:
    doc = rule.doc()
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": _paragraph(doc, "What") or rule.summary()},
        "help": {"text": doc, "markdown": doc_markdown(doc)},
        "helpUri": rule_url(rule.code),
        "defaultConfiguration": {"enabled": rule.default_enabled, "level": "warning"},
        "properties": {
            "tags": ["performance", "gpu", "pytorch", family(rule.code)],
            "precision": "high",
            "problem.severity": "warning",
            "fixSafety": rule.fix_safety.value,
        },
    }


def artifact(path: str, context: Context) -> dict[str, str]:
    posix = repo_path(path, context)
    if posix.startswith("/"):
        return {"uri": PurePosixPath(posix).as_uri()}
    return {"uri": quote(posix, safe="/"), "uriBaseId": "%SRCROOT%"}


def _region(start: tuple[int, int], end: tuple[int, int]) -> dict[str, int]:
    return {"startLine": start[0], "startColumn": start[1], "endLine": end[0], "endColumn": end[1]}


def _fix(fix: FixRecord, location: dict[str, str]) -> dict[str, Any]:
    return {
        "description": {"text": f"{fix.title} ({fix.applicability} fix)"},
        "artifactChanges": [
            {
                "artifactLocation": location,
                "replacements": [
                    {
                        "deletedRegion": _region(e.start, e.end),
                        "insertedContent": {"text": e.content},
                    }
                    for e in fix.edits
                ],
            }
        ],
        "properties": {"applicability": fix.applicability},
    }


def _result(v: Violation, index: int, location: dict[str, str], fingerprint: str) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": location}
    if v.cell is None:  # a notebook's positions count within a cell: no region in the file
        physical["region"] = _region((v.line, v.column), (v.end_line, v.end_column))
    result: dict[str, Any] = {
        "ruleId": v.code,
        "ruleIndex": index,
        "level": "error" if is_error(v) else "note" if low_impact(v) else "warning",
        "message": {"text": cell_prefix(v) + v.message},
        "locations": [{"physicalLocation": physical}],
        "partialFingerprints": {FINGERPRINT: fingerprint},
    }
    if v.cell is not None:
        result["properties"] = {"cell": v.cell}
    elif v.fix is not None and v.fix.edits:
        result["fixes"] = [_fix(v.fix, location)]
    return result


# The records of files that could not be checked (not rules: never selected or ignored).
_ERRORS = {
    INVALID_SYNTAX: "The file is not valid Python: it could not be checked.",
    IO_ERROR: "The file could not be read or written (or is not a notebook).",
    ANALYSIS_ERROR: "Valid code that torchlint could not analyse or fix.",
    RULE_ERROR: "A local or installed rule raised on the file; the others' findings are kept.",
}


def error_descriptor(code: str) -> dict[str, Any]:
    return {
        "id": code,
        "name": ERROR_NAMES[code],
        "shortDescription": {"text": _ERRORS[code]},
        "helpUri": rule_url(code),
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": ["torchlint-error"], "problem.severity": "error"},
    }


def render(results: list[FileResult], context: Context) -> str:
    rules = all_rules()
    local = {v.code for r in results for v in r.violations if v.code not in rules}
    rules = {**rules, **{code: find(code) for code in sorted(local)}}
    index = {code: i for i, code in enumerate([*rules, *ERROR_NAMES])}
    out = []
    notifications = []
    for r in results:
        location = artifact(r.path, context)
        for e in r.errors:
            notifications.append(
                {
                    "level": "error",
                    "message": {"text": str(e)},
                    "locations": [{"physicalLocation": {"artifactLocation": location}}],
                }
            )
        out += [_result(v, index[v.code], location, fp) for v, fp in fingerprints(r, context)]
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchlint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": TOOL_URL,
                        "rules": [
                            *(rule_descriptor(rule) for rule in rules.values()),
                            *(error_descriptor(code) for code in ERROR_NAMES),
                        ],
                    }
                },
                "invocations": [
                    {
                        "executionSuccessful": not notifications,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "columnKind": "unicodeCodePoints",
                "results": out,
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
