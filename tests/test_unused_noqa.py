"""TL904 unused-noqa (ruff's RUF100): the `# noqa` codes of the rules selected that
suppress nothing, reported and removed; everything else a noqa comment may mean to other
tools, or to another run, left alone. Its fixtures are fixtures/TL904/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchlint.config.load import default_options, instantiate
from torchlint.lint.linter import Linter
from torchlint.lint.noqa import parse_suppressions
from torchlint.settings import Settings

from .conftest import LOADER, run_cli, run_cli_process
from .test_notebook import lines, notebook

TL201_LINE = "loader = DataLoader(ds, batch_size=256, pin_memory=True)"
# LOADER with its loader given workers: TL201 has nothing to say about it any more.
WORKERS = LOADER.replace("pin_memory=True)", "pin_memory=True, num_workers=4)")
WORKERS_LINE = TL201_LINE.replace("pin_memory=True)", "pin_memory=True, num_workers=4)")
# TL502's finding here is of low impact (hidden by default): still suppressed.
LOW = "import torch\n\nscaler = torch.cuda.amp.GradScaler()  # noqa: TL502\n"


def linter(*codes: str, low_impact: bool = False) -> Linter:
    settings = Settings(options=default_options())
    return Linter(instantiate([*codes, "TL904"]), settings, low_impact=low_impact)


def unused(text: str, *codes: str) -> list[tuple[int, str]]:
    return [(v.line, v.message) for v in linter(*codes).lint(text) if v.code == "TL904"]


def fixed(text: str, *codes: str) -> str:
    return linter(*codes).fix(text).text


def with_comment(text: str, line: str, comment: str) -> str:
    return text.replace(f"{line}\n", f"{line}  {comment}\n")


def test_a_code_that_suppresses_nothing_is_reported_and_removed():
    text = with_comment(WORKERS, WORKERS_LINE, "# noqa: TL201")
    assert unused(text, "TL201") == [(3, "Unused `noqa` directive (unused: `TL201`)")]
    assert fixed(text, "TL201") == WORKERS


def test_a_suppressing_code_is_used_and_the_others_go():
    text = with_comment(LOADER, TL201_LINE, "# noqa: TL202, TL201, E501")
    assert unused(text, "TL201", "TL202") == [(3, "Unused `noqa` directive (unused: `TL202`)")]
    assert fixed(text, "TL201", "TL202") == with_comment(LOADER, TL201_LINE, "# noqa: TL201, E501")


@pytest.mark.parametrize(
    ("comment", "codes"),
    [
        ("# noqa: TL201", ()),  # TL201 not selected in this run
        ("# noqa: E501, F401", ("TL201",)),  # another tool's codes
        ("# noqa", ("TL201",)),  # blanket: it silences the other tools too
        ("# noqa: X100", ("TL201",)),  # a plugin's or a local rule's code
        ("# noqa: TL201, TL904", ("TL201",)),  # kept on purpose
    ],
)
def test_what_is_left_alone(comment: str, codes: tuple[str, ...]):
    assert unused(with_comment(WORKERS, WORKERS_LINE, comment), *codes) == []


def test_a_file_exempt_from_tl904_is_not_judged():
    text = "# torchlint: noqa: TL904\n" + with_comment(WORKERS, WORKERS_LINE, "# noqa: TL201")
    assert unused(text, "TL201") == []


def test_a_low_impact_finding_hidden_by_default_is_suppressed_all_the_same():
    bare = LOW.replace("  # noqa: TL502", "")
    assert [v.impact for v in linter("TL502").lint(bare)] == ["low"]
    assert linter("TL502").lint(LOW) == []


def test_either_line_of_a_multi_line_statement_may_carry_it():
    first = LOADER.replace("pin_memory=True)\n", "pin_memory=True,  # noqa: TL201\n)\n")
    last = first.replace("  # noqa: TL201\n)\n", "\n)  # noqa: TL201\n")
    both = first.replace("\n)\n", "\n)  # noqa: TL201\n")
    assert unused(first, "TL201") == unused(last, "TL201") == unused(both, "TL201") == []


def test_a_comment_alone_on_its_line_goes_with_the_line():
    text = WORKERS.replace("import torch\n", "import torch\n# noqa: TL201\n")
    assert unused(text, "TL201") == [(2, "Unused `noqa` directive (unused: `TL201`)")]
    assert fixed(text, "TL201") == WORKERS
    assert fixed(WORKERS + "# noqa: TL201", "TL201") == WORKERS  # the last line, no newline


def test_a_line_comment_under_a_file_exemption_suppresses_nothing():
    """As ruff: the file-level comment suppresses the finding first."""
    text = "# torchlint: noqa: TL201\n" + with_comment(LOADER, TL201_LINE, "# noqa: TL201")
    assert unused(text, "TL201") == [(4, "Unused `noqa` directive (unused: `TL201`)")]


def test_the_suppressions_say_which_lines_suppress_a_finding():
    s = parse_suppressions("a = f(  # noqa: TL201\n  1,\n)  # noqa: TL201, E501\n")
    assert sorted(s.suppressing("TL201", 2)) == [1, 3] and s.suppressing("E501", 1) == [3]
    assert s.lines[3].codes == ("TL201", "E501") and (s.lines[3].start, s.lines[3].end) == (3, 22)


def test_fix_removes_it_after_the_other_fixes_and_never_as_found_later():
    model = "model = torch.nn.Linear(8, 1).cuda()"
    text = with_comment(LOADER, model, "# noqa: TL202")
    outcome = linter("TL201", "TL202").fix(text, unsafe=True)
    assert outcome.fixed == ["TL201", "TL904"] and outcome.later == []
    assert "# noqa" not in outcome.text and "num_workers=NUM_WORKERS" in outcome.text


def test_unfixable_leaves_the_comment():
    linted = Linter(instantiate(["TL201", "TL904"]), unfixable=frozenset({"TL904"}))
    text = with_comment(WORKERS, WORKERS_LINE, "# noqa: TL201")
    assert [v.fix for v in linted.lint(text)] == [None]
    assert linted.fix(text).text == text


def test_off_by_default_and_selected_explicitly(tmp_path: Path):
    (tmp_path / "train.py").write_text(with_comment(WORKERS, WORKERS_LINE, "# noqa: TL201"))
    assert run_cli("check", "--no-cache", ".", cwd=tmp_path).returncode == 0
    result = run_cli(
        "check", "--no-cache", "--extend-select", "TL904", "--output-format", "json", ".",
        cwd=tmp_path,
    )  # fmt: skip
    (finding,) = json.loads(result.stdout)
    assert result.returncode == 1 and finding["code"] == "TL904"
    assert finding["fix"]["applicability"] == "safe"
    assert finding["fix"]["edits"] == [
        {"content": WORKERS_LINE + "\n", "location": {"row": 3, "column": 1},
         "end_location": {"row": 4, "column": 1}, "cell": None}
    ]  # fmt: skip


def test_add_noqa_then_nothing_is_unused(tmp_path: Path):
    """The comments `--add-noqa` writes suppress what they are for; it adds none for
    TL904 (as ruff's adds no RUF100): a stale comment is removed, not kept."""
    (tmp_path / "train.py").write_text(LOADER)
    stale = with_comment(WORKERS, WORKERS_LINE, "# noqa: TL201")
    (tmp_path / "stale.py").write_text(stale)
    select = ("--extend-select", "TL904")
    added = run_cli("check", "--no-cache", "--add-noqa", *select, ".", cwd=tmp_path)
    assert added.returncode == 0 and "added 1 noqa directive" in added.stderr
    assert (tmp_path / "stale.py").read_text() == stale
    (tmp_path / "stale.py").unlink()
    assert run_cli("check", "--no-cache", *select, ".", cwd=tmp_path).returncode == 0


def test_in_a_notebook_in_cell_positions(tmp_path: Path):
    head, body = WORKERS.split("loader = ")
    cells = (
        ("code", lines("%matplotlib inline\n" + head.rstrip("\n"))),
        ("markdown", ["# Data"]),
        ("code", lines("loader = " + body.replace("=4)\n", "=4)  # noqa: TL201\n", 1))),
    )
    (tmp_path / "nb.ipynb").write_text(notebook(*cells))
    select = ("--no-cache", "--select", "TL201,TL904")
    result = run_cli("check", *select, "--output-format", "concise", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 1
    assert "nb.ipynb:cell 3:1:" in result.stdout and "TL904" in result.stdout
    assert run_cli("check", *select, "--fix", "nb.ipynb", cwd=tmp_path).returncode == 0
    sources = [c["source"] for c in json.loads((tmp_path / "nb.ipynb").read_text())["cells"]]
    assert sources[0] == cells[0][1] and sources[2][0] == WORKERS_LINE + "\n"


def test_the_command_reports_diffs_and_fixes_it(tmp_path: Path):
    """The real command: `--diff` shows the removal, `--fix` makes it."""
    text = with_comment(WORKERS, WORKERS_LINE, "# noqa: TL201, E501")
    (tmp_path / "train.py").write_text(text)
    select = ("--no-cache", "--extend-select", "TL904")
    check = run_cli_process("check", *select, "train.py", cwd=tmp_path)
    assert check.returncode == 1
    assert "TL904 [*] Unused `noqa` directive (unused: `TL201`)" in check.stdout
    diff = run_cli_process("check", *select, "--diff", "train.py", cwd=tmp_path)
    assert diff.returncode == 1 and f"+{WORKERS_LINE}  # noqa: E501\n" in diff.stdout
    fix = run_cli_process("check", *select, "--fix", "train.py", cwd=tmp_path)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    kept = with_comment(WORKERS, WORKERS_LINE, "# noqa: E501")
    assert (tmp_path / "train.py").read_text() == kept
