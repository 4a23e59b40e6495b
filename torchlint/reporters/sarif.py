"""SARIF 2.1.0 for code scanning (GitHub, Azure DevOps, IDE viewers).

One run: `tool.driver` describes every rule (its summary, its page linked) and the records of
files that could not be checked (TL000...: results of level error, and notifications),
each result points into a file by a URI relative to the repository root, columns count
code points, and fixes carry the edits of the fix.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from torchlint import __version__
from torchlint.lint.registry import all_rules, family, find
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
    SKIPPED,
    FileResult,
    FixRecord,
    Violation,
)
from torchlint.rule import Rule

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT = "torchlint/v1"


def rule_descriptor(rule: type[Rule]) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        # The documentation linked, not embedded (as ruff's): a report stays the size of
        # its findings.
        "help": {
            "text": f"{rule.summary()} Documentation: {rule_url(rule.code)}",
            "markdown": f"{rule.summary()} [Documentation]({rule_url(rule.code)})",
        },
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


def skipped_descriptor() -> dict[str, Any]:
    return {
        "id": SKIPPED,
        "name": "file-skipped",
        "shortDescription": {"text": "The file was not analysed (too large to check)."},
        "helpUri": rule_url(SKIPPED),
        "defaultConfiguration": {"level": "note"},
        "properties": {"tags": ["torchlint-notice"], "problem.severity": "recommendation"},
    }


def _descriptors(results: list[FileResult]) -> list[dict[str, Any]]:
    """The rules and records the results hold, each described once (in the order of the
    rule list, then the records of files not checked): a report is the size of its
    findings, not of the catalog."""
    used = {v.code for r in results for v in r.records()}
    rules = all_rules()
    local = sorted(code for code in used if code not in rules and code not in ERROR_NAMES)
    rules = {**rules, **{code: find(code) for code in local if code != SKIPPED}}
    found = [rule_descriptor(rule) for code, rule in rules.items() if code in used]
    found += [error_descriptor(code) for code in ERROR_NAMES if code in used]
    return found + ([skipped_descriptor()] if SKIPPED in used else [])


def render(results: list[FileResult], context: Context) -> str:
    described = _descriptors(results)
    index = {d["id"]: i for i, d in enumerate(described)}
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
                        "rules": described,
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
