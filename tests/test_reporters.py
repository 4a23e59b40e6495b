"""Every output format: golden files from the real CLI, schema checks, escaping.

The golden input is a small project made in a temporary directory: a file with
non-ASCII text on the flagged lines, inside a directory whose name holds `,`, `:`,
`%` and a space, a file with a syntax error, plus a path that does not exist (a file
error): both errors are records of every format. Goldens live in
tests/golden/; UPDATE_GOLDEN=1 rewrites them (read the diff before committing).
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from torchlint import __version__
from torchlint.reporters import FORMATS, HUMAN, Context, render
from torchlint.reporters.github import escape_data, escape_property, summary
from torchlint.results import ERROR_NAMES, FileResult, FixRecord, TextEdit, Violation

from .conftest import ROOT, run_cli

GOLDEN = Path(__file__).parent / "golden"
SARIF_SCHEMA = Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json"
JSON_SCHEMA = ROOT / "docs" / "schemas" / "json-output.schema.json"
ODD_DIR = "odd dir, 50%: x"
BROKEN = f"{ODD_DIR}/bröken.py"  # a syntax error: a record in every format, as a finding
SOURCE = """\
import torch
from torch.utils.data import DataLoader

# ünïcödé: columns in code points differ from UTF-8 bytes below
données = DataLoader(ds)  # café
val = DataLoader(
    ds, batch_size=2,
)
model = torch.nn.Linear(8, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
if __name__ == "__main__":
    for loader in (données, val):
        for x in loader:
            model(x.cuda()).sum().backward()
            opt.step()
"""

# positions in a notebook count within a cell: CI formats report them on the whole file
NOTEBOOK = json.dumps(
    {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Training"]},
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": ["import torch\n", "from torch.utils.data import DataLoader\n"],
            },
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": ["loader = DataLoader(ds)"],
            },
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": [
                    "model = torch.nn.Linear(8, 1).cuda()\n",
                    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n",
                    "for x in loader:\n",
                    "    model(x.cuda()).sum().backward()\n",
                    "    opt.step()",
                ],
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    },
    indent=1,
)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("golden")
    (root / ".git").mkdir()  # the repository root that CI formats name paths from
    (root / ODD_DIR).mkdir()
    (root / ODD_DIR / "träin.py").write_text(SOURCE, encoding="utf-8")
    (root / ODD_DIR / "wörk.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    (root / BROKEN).write_text("import torch\n\nx = (1,\n", encoding="utf-8")
    return root


def run_format(project: Path, fmt: str, *extra: str, env: dict | None = None):
    args = ["check", "--select", "TL201", "--output-format", fmt, *extra, ODD_DIR, "missing.py"]
    result = run_cli(*args, cwd=project, env=env)
    assert result.returncode == 2, result.stderr  # a file error outranks findings
    # Errors are records of the report; a program's report has them on stderr too.
    stderr = "" if fmt in HUMAN else "torchlint: error: missing.py: no such file or directory\n"
    stderr += "" if fmt in HUMAN else f"torchlint: error: {BROKEN}: syntax error at 3:5: "
    assert result.stderr.startswith(stderr), result.stderr
    assert "TL000" in result.stdout and "TL900" in result.stdout
    return result


def normalize(fmt: str, text: str) -> str:
    """Keep goldens stable as rules are added: only the rules the results use, no version."""
    if fmt != "sarif":
        return text
    log = json.loads(text)
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    used = sorted({r["ruleId"] for r in run["results"]})
    driver["rules"] = [r for r in driver["rules"] if r["id"] in used]
    for r in run["results"]:
        r["ruleIndex"] = used.index(r["ruleId"])
    driver["version"] = driver["semanticVersion"] = "<version>"
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert path.is_file(), f"no golden file {path}: run with UPDATE_GOLDEN=1"
    assert actual == path.read_text(encoding="utf-8"), f"{name} differs (UPDATE_GOLDEN=1)"


SUFFIX = {"json": "json", "sarif": "sarif.json", "gitlab": "json", "rdjson": "json", "junit": "xml"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_golden(project, fmt):
    result = run_format(project, fmt)
    check_golden(f"check.{fmt}.{SUFFIX.get(fmt, 'txt')}", normalize(fmt, result.stdout))


def test_github_step_summary_golden(project, tmp_path):
    summary_file = tmp_path / "summary.md"
    summary_file.write_text("earlier step\n", encoding="utf-8")
    run_format(project, "github", env={"GITHUB_STEP_SUMMARY": str(summary_file)})
    text = summary_file.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n")  # appended, never overwritten
    check_golden("check.github-summary.md", text.removeprefix("earlier step\n"))


def test_sarif_is_valid_and_describes_every_rule(project):
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    log = json.loads(run_format(project, "sarif").stdout)
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["version"] == __version__
    # The rules and records the results hold, described once each (the catalog's
    # documentation is linked, not embedded: a report is the size of its findings).
    assert [r["id"] for r in driver["rules"]] == ["TL201", "TL000", "TL900"]
    assert all("fullDescription" not in r and r["helpUri"] for r in driver["rules"])
    errors = [r for r in run["results"] if r["ruleId"] in ERROR_NAMES]
    assert [(r["ruleId"], r["level"]) for r in errors] == [("TL900", "error"), ("TL000", "error")]
    assert errors[1]["locations"][0]["physicalLocation"]["region"]["startLine"] == 3
    for rule in driver["rules"][:1]:
        assert rule["shortDescription"]["text"] and rule["help"]["markdown"]
        assert {"performance", "gpu"} <= set(rule["properties"]["tags"])
    for result in run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    first = next(r for r in run["results"] if r["ruleId"] == "TL201")
    uri = first["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "odd%20dir%2C%2050%25%3A%20x/tr%C3%A4in.py"
    assert first["fixes"][0]["artifactChanges"][0]["replacements"]
    assert run["invocations"][0]["executionSuccessful"] is False
    notebook = run["results"][-1]
    assert notebook["message"]["text"].startswith("cell 3, line 1, column 10: ")
    assert "region" not in notebook["locations"][0]["physicalLocation"]


def test_sarif_of_a_clean_run_is_valid(tmp_path):
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    (tmp_path / "ok.py").write_text("import torch\n")
    result = run_cli("check", "--output-format", "sarif", "ok.py", cwd=tmp_path)
    assert result.returncode == 0
    log = json.loads(result.stdout)
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    assert log["runs"][0]["results"] == []


def test_json_formats_follow_the_documented_schema(project):
    schema = json.loads(JSON_SCHEMA.read_text(encoding="utf-8"))
    items = json.loads(run_format(project, "json").stdout)
    jsonschema.Draft202012Validator(schema).validate(items)
    lines = run_format(project, "json-lines").stdout.splitlines()
    assert [json.loads(line) for line in lines] == items
    findings = [item for item in items if item["code"] == "TL201"]
    assert findings[0]["location"] == {"row": 5, "column": 11}  # code points


def test_rdjson_counts_utf8_bytes(project):
    report = json.loads(run_format(project, "rdjson").stdout)
    first = next(d for d in report["diagnostics"] if d["code"]["value"] == "TL201")
    assert first["location"]["range"]["start"] == {"line": 5, "column": 12}  # é is 2 bytes
    lines = run_format(project, "rdjsonl").stdout.splitlines()
    assert [json.loads(line) for line in lines] == report["diagnostics"]


def test_gitlab_fingerprints_ignore_line_numbers(project, tmp_path):
    before = json.loads(run_format(project, "gitlab").stdout)
    (tmp_path / "shifted" / ODD_DIR).mkdir(parents=True)
    (tmp_path / "shifted" / BROKEN).write_text("import torch\n\nx = (1,\n", encoding="utf-8")
    shifted = tmp_path / "shifted"
    (shifted / ".git").mkdir()
    (shifted / ODD_DIR / "träin.py").write_text("\n\n" + SOURCE, encoding="utf-8")
    (shifted / ODD_DIR / "wörk.ipynb").write_text(NOTEBOOK, encoding="utf-8")
    after = json.loads(run_format(shifted, "gitlab").stdout)
    assert [i["fingerprint"] for i in before] == [i["fingerprint"] for i in after]
    lines = [i["location"].get("positions", {}).get("begin", {}).get("line") for i in after]
    assert lines == [1, 3, 7, 8, None]  # the notebook's finding is on the whole file
    assert len({i["fingerprint"] for i in before}) == len(before)


def test_paths_are_relative_to_the_repository_root(project):
    sub = project / ODD_DIR
    result = run_cli("check", "--output-format", "github", "träin.py", cwd=sub)
    assert "::warning file=odd dir%2C 50%25%3A x/träin.py,line=5," in result.stdout
    gitlab = json.loads(run_cli("check", "--output-format", "gitlab", ".", cwd=sub).stdout)
    assert [i["location"]["path"] for i in gitlab][:2] == [BROKEN, f"{ODD_DIR}/träin.py"]


def test_junit_is_well_formed(project):
    root = ET.fromstring(run_format(project, "junit").stdout)
    assert root.get("tests") == "5" and root.get("failures") == "3" and root.get("errors") == "2"


# -- escaping, with results made by hand: newlines and control characters in paths


ODD_PATH = "we,ird:50%\nname\x1b.py"
MESSAGE = "bad: 100%\r\nof the time, really"


def odd_results() -> list[FileResult]:
    fix = FixRecord("Do it", "safe", (TextEdit((1, 1), (2, 1), "é = 2\n"),))
    v = Violation("TL201", "dataloader-sync-loading", MESSAGE, 1, 3, 1, 9, fix)
    return [FileResult(ODD_PATH, [v], text="x = 😀é + 1\n")]


def test_github_escaping():
    assert escape_data("a%b\r\nc:d,e") == "a%25b%0D%0Ac:d,e"
    assert escape_property("a%b\r\nc:d,e") == "a%25b%0D%0Ac%3Ad%2Ce"
    out = render("github", odd_results(), Context())
    assert out == (
        "::warning file=we%2Cird%3A50%25%0Aname\x1b.py,line=1,endLine=1,col=3,endColumn=9,"
        "title=torchlint (TL201)::bad: 100%25%0D%0Aof the time, really\n"
    )
    table = summary(odd_results(), Context())
    assert "| we,ird:50% name\x1b.py | 1 | TL201 | bad: 100%  of the time, really |" in table


def test_every_format_survives_odd_paths_and_messages():
    for fmt in FORMATS:
        out = render(fmt, odd_results(), Context())
        if fmt == "junit":
            root = ET.fromstring(out)
            failure = root.find("testsuite/testcase/failure")
            assert failure is not None and failure.get("message") == MESSAGE
            assert root.find("testsuite").get("name") == "we,ird:50%\nname?.py"
        elif fmt in ("json", "sarif", "gitlab", "rdjson"):
            assert MESSAGE in out or json.dumps(MESSAGE)[1:-1] in out
            json.loads(out)
        elif fmt in ("json-lines", "rdjsonl"):
            assert len(out.splitlines()) == 1
            json.loads(out)


def test_columns_in_bytes_where_the_format_says_so():
    rd = json.loads(render("rdjson", odd_results(), Context()))["diagnostics"][0]
    # "x = 😀é + 1": code-point column 3 is byte 3; column 9 comes after 😀 (4 bytes) and é (2)
    assert rd["location"]["range"] == {
        "start": {"line": 1, "column": 3},
        "end": {"line": 1, "column": 13},
    }
    sarif = json.loads(render("sarif", odd_results(), Context()))["runs"][0]
    assert sarif["columnKind"] == "unicodeCodePoints"
    assert sarif["results"][0]["locations"][0]["physicalLocation"]["region"]["endColumn"] == 9


MULTILINE = (
    "x = 1\nwith torch.autocast(\n" + "".join(f"    a{i},\n" for i in range(10)) + "):\n    y = 2\n"
)


def _excerpt_of(v: Violation) -> list[str]:
    text = render("text", [FileResult("t.py", [v], text=MULTILINE)], Context())
    return text.splitlines()[1:-1]


def test_multiline_finding_is_drawn_to_its_last_line():
    """As ruff draws a range over lines: a bar from its first character to its last,
    the closing line shown; a long range keeps its head and tail around `...`."""
    assert _excerpt_of(Violation("TL999", "n", "m", 2, 6, 4, 1)) == [
        "  |",
        "1 |   x = 1",
        "2 |   with torch.autocast(",
        "  |  ______^",
        "3 | |     a0,",
        "  | |_______^ TL999",  # ends where line 4 starts: the end of line 3
        "4 |       a1,",
        "  |",
    ]
    assert _excerpt_of(Violation("TL999", "n", "m", 2, 1, 13, 3)) == [
        "   |",
        " 1 |   x = 1",
        " 2 | / with torch.autocast(",
        " 3 | |     a0,",
        " 4 | |     a1,",
        " 5 | |     a2,",
        "...  |",
        "12 | |     a9,",
        "13 | | ):",
        "   | |__^ TL999",
        "14 |       y = 2",
        "   |",
    ]


def test_code_frames_expand_tabs_so_carets_point_at_the_code():
    """A tab-indented file: the frame shows spaces (to 4-column stops) and the carets
    and the multi-line bar start under the flagged characters."""
    text = "if x:\n\tloader = DataLoader(ds)\n\tval = DataLoader(\n\t\tds)\n"
    one = Violation("TL201", "n", "m", 2, 11, 2, 25)  # `DataLoader(ds)`, after a tab
    out = render("text", [FileResult("t.py", [one], text=text)], Context())
    assert "\t" not in out
    code = next(line for line in out.splitlines() if line.startswith("2 |"))
    caret = next(line for line in out.splitlines() if "^" in line)
    assert caret.index("^") == code.index("DataLoader")
    assert caret.count("^") == len("DataLoader(ds)")
    several = Violation("TL201", "n", "m", 3, 8, 4, 6)  # `DataLoader(\n\t\tds)`
    frame = render("text", [FileResult("t.py", [several], text=text)], Context()).splitlines()
    start = next(line for line in frame if line.startswith("3 |"))
    lead = next(line for line in frame if line.rstrip().endswith("_^"))
    assert lead.index("^") == start.index("DataLoader")
    end = next(line for line in frame if line.startswith("4 |"))
    close = next(line for line in frame if line.endswith("^ TL201"))
    assert close.index("^") == end.index(")")
