"""JUnit XML: a test suite per file, a failing test case per finding.

For CI systems that show test reports (GitLab, Jenkins, Azure Pipelines); a file (or
a notebook cell) that could not be checked is a test case with an error.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from torchlint.reporters import Context, is_error
from torchlint.results import FileResult

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str) -> str:
    """Characters XML 1.0 cannot hold (control characters, lone surrogates) as `?`."""
    return _NOT_XML.sub("?", text)


def render(results: list[FileResult], context: Context) -> str:
    root = ET.Element("testsuites", name="torchlint")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for r in results:
        path = _xml(r.path)
        suite = ET.SubElement(root, "testsuite", name=path)
        counts = {"tests": 0, "failures": 0, "errors": 0}
        for v in r.records():
            cell = f"cell {v.cell}:" if v.cell is not None else ""
            where = f"{path}:{cell}{v.line}:{v.column}"
            case = ET.SubElement(
                suite, "testcase", name=f"{v.code} {where}", classname=path, file=path
            )
            if v.cell is None:  # notebook lines count within a cell
                case.set("line", str(v.line))
            kind = "error" if is_error(v) else "failure"
            outcome = ET.SubElement(case, kind, message=_xml(v.message), type=v.code)
            outcome.text = f"{where}: {v.code} {_xml(v.message)}"
            counts["tests"] += 1
            counts["errors" if is_error(v) else "failures"] += 1
        for key, n in counts.items():
            suite.set(key, str(n))
            totals[key] += n
    if not len(root):
        suite = ET.SubElement(
            root, "testsuite", name="torchlint", tests="1", failures="0", errors="0"
        )
        ET.SubElement(suite, "testcase", name="no problems found", classname="torchlint")
        totals["tests"] = 1
    for key, n in totals.items():
        root.set(key, str(n))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
