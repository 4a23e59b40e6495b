"""Jupyter notebooks: the cell map, IPython syntax, byte-exact write-back, and the CLI.

fixtures/notebooks/<name>.ipynb        Colab/Jupyter exports, as users have them
fixtures/notebooks/<name>.fixed.ipynb  exact output of `fix --unsafe-fixes --select TL201`
                                        (or the rules SELECTS names for the notebook)

The in-process tests of the machinery use a test rule (TLX02) that reports every
DataLoader without workers and adds them as TL201 does (an edit in one cell, a module-level
definition in the import cell): what TL201 decides is for its own tests.

UPDATE_FIXTURES=1 rewrites the .fixed.ipynb files from the current fixer.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import libcst as cst
import pytest

from torchlint.config.load import default_options
from torchlint.edits import workers_fix
from torchlint.fixes import Applicability, FixSafety, Remove, fix
from torchlint.lint.linter import Linter
from torchlint.lint.notebook import Notebook, NotebookError, Program
from torchlint.lint.notebook_json import source_spans
from torchlint.results import Job
from torchlint.rule import Diagnostic, Rule
from torchlint.run import runner
from torchlint.run.runner import lint_notebook
from torchlint.semantic import MISSING, Settings
from torchlint.semantic.syntax import int_value

from .conftest import FIXTURES, run_cli

NOTEBOOKS = FIXTURES / "notebooks"
FIXED = sorted(p for p in NOTEBOOKS.glob("*.fixed.ipynb"))
SELECT = ("--select", "TL201")
# cell_order: TL202's `torch.cuda.is_available()` in a cell that runs before the cell
# importing torch (a `%%writefile` cell's imports bind nothing in the notebook).
# lora_finetune: TL707 (preview) adds `import torch` to the import cell and loads the
# frozen base in bfloat16 in a later one.
SELECTS = {
    "cell_order": ("--select", "TL202"),
    "lora_finetune": ("--select", "TL707", "--preview"),
}


def notebook(*cells: tuple[str, str | list[str]], **metadata) -> str:
    """Notebook JSON as Jupyter writes it (indent 1, sorted keys)."""
    raw = []
    for kind, source in cells:
        cell = {"cell_type": kind, "metadata": {}, "source": source}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        raw.append(cell)
    data = {"cells": raw, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


LOADER_CELLS = (
    ("markdown", ["# Title"]),
    ("code", lines("import torch\nfrom torch.utils.data import DataLoader")),
    ("markdown", ["## Data"]),
    (
        "code",
        lines("%matplotlib inline\nds = torch.arange(8)\nloader = DataLoader(ds, batch_size=4)"),
    ),
)


class _Workers(Rule):
    """TLX02 loader-workers: a DataLoader without workers (`num_workers=0` on one that
    feeds a training loop), fixed with TL201's edit."""

    code = "TLX02"
    name = "loader-workers"
    fix_safety = FixSafety.UNSAFE
    tokens = ("DataLoader",)

    def check(self, module) -> Iterator[Diagnostic]:
        for loader in module.loaders.sites:
            workers = loader.arg("num_workers")
            if workers is MISSING or (int_value(workers) == 0 and loader.feeds_training):
                yield self.diagnostic(
                    loader.call.node, "no workers", workers_fix(loader, "Set num_workers")
                )


@pytest.fixture(autouse=True)
def workers_rule(monkeypatch):
    real = runner._linter
    monkeypatch.setattr(
        runner,
        "_linter",
        lambda job, codes, given: (
            Linter([_Workers()], job.settings) if "TLX02" in codes else real(job, codes, given)
        ),
    )


# An MNIST loader, then a cell that trains on the GPU with it (for TL201 itself).
TRAINING_CELLS = (
    ("markdown", ["# Title"]),
    (
        "code",
        lines(
            "import torch\n"
            "from torch.utils.data import DataLoader\n"
            "from torchvision import datasets"
        ),
    ),
    ("markdown", ["## Data"]),
    (
        "code",
        lines(
            "%matplotlib inline\nds = datasets.MNIST('data')\nloader = DataLoader(ds, batch_size=4)"
        ),
    ),
    (
        "code",
        lines(
            "model = torch.nn.Linear(1, 1).cuda()\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for x in loader:\n"
            "    model(x.float().cuda()[:, None]).sum().backward()\n"
            "    opt.step()"
        ),
    ),
)


def job(fix: bool = False, **kw) -> Job:
    return Job(
        codes=("TLX02",), settings=Settings(options=default_options()), fix=fix, unsafe=fix, **kw
    )


def lint(text: str, fix: bool = False, **kw):
    return lint_notebook(text, "nb.ipynb", job(fix, **kw), ["TLX02"])


# ---------------------------------------------------------------------------------------
# The program and its cell map


def test_cells_are_numbered_among_all_cells_and_lines_are_cell_relative():
    result, new = lint(notebook(*LOADER_CELLS))
    assert result.error is None and new == notebook(*LOADER_CELLS)
    [v] = result.violations
    # cell 4 is the second code cell: markdown cells count, as ruff counts them
    assert (v.cell, v.line, v.column, v.end_line, v.end_column) == (4, 3, 10, 3, 38)
    assert result.text is None
    assert result.cells is not None and result.cells[3].splitlines()[2].startswith("loader = ")


def test_program_joins_code_cells_with_separators_and_placeholders():
    nb = Notebook.parse(notebook(*LOADER_CELLS))
    program = nb.program()
    assert program.cells == [2, 4]
    code = program.source.splitlines()
    assert code[0] == "import torch"
    assert code[2].startswith("# <torchlint cell 4>")
    assert code[3].startswith("# <torchlint ipython 0>")  # %matplotlib inline, same line count
    assert len(code) == 2 + 1 + 3
    cst.parse_module(program.source)
    chunks = program.split(program.source)
    assert [(c.cell, c.start) for c in chunks] == [(2, 1), (4, 4)]
    assert [c.source for c in chunks] == [nb.cells[1].source, nb.cells[3].source]


MAGICS = """\
%load_ext autoreload
!pip install -q timm \\
    torchvision
files = !ls data
a, b = %sx echo 1 2
DataLoader?
??DataLoader
DataLoader.__init__??
/print 1 2
x = (10
     % 3)
doc = '''
%not a magic
!nor this
'''
for f in files:
    !echo {f}
    %time print(f)
if x:
    %debug
y = 1  # why?
await something()
"""


def test_ipython_lines_become_placeholders_and_come_back_exactly():
    nb = Notebook.parse(notebook(("code", lines(MAGICS))))
    program = nb.program()
    cst.parse_module(program.source)
    code = program.source.splitlines()
    assert len(code) == len(MAGICS.splitlines())
    replaced = [i + 1 for i, line in enumerate(code) if "<torchlint ipython" in line]
    assert replaced == [1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 18, 20]
    assert code[10] == "     % 3)" and code[12] == "%not a magic"  # in brackets, in a string
    assert code[16] == "    pass  # <torchlint ipython 9>"  # indented: still a statement
    assert program.split(program.source)[0].source == MAGICS


def test_cell_magics_python_bodies_are_linted_others_skipped():
    text = notebook(
        ("code", lines("%%bash\nDataLoader(x)\n")),
        ("code", lines("%%time\nfrom torch.utils.data import DataLoader\nDataLoader(x)")),
        ("code", lines("%%writefile t.py\nfrom torch.utils.data import DataLoader\nDataLoader(x)")),
    )
    program = Notebook.parse(text).program()
    assert program.cells == [2]
    result, _ = lint(text)
    assert [(v.cell, v.line) for v in result.violations] == [(2, 3)]


def test_a_dataloader_in_one_cell_trained_in_another_is_one_program():
    text = notebook(
        ("code", lines("import torch\nfrom torch.utils.data import DataLoader")),
        (
            "code",
            lines("loader = DataLoader(ds, num_workers=0)\nidle = DataLoader(ds, num_workers=0)"),
        ),
        ("markdown", ["## Train"]),
        (
            "code",
            lines("for x, y in loader:\n    loss = model(x)\n    loss.backward()\n    opt.step()"),
        ),
    )
    result, _ = lint(text)
    assert [(v.cell, v.line) for v in result.violations] == [(2, 1)]


def test_future_import_in_a_later_cell_does_not_break_the_program():
    text = notebook(
        ("code", ["x = 1"]), ("code", lines("from __future__ import annotations\ny = 2"))
    )
    program = Notebook.parse(text).program()
    compile(program.source, "nb", "exec")
    assert program.split(program.source)[1].source == "from __future__ import annotations\ny = 2"


def test_separator_tokens_avoid_text_already_in_the_notebook():
    text = notebook(("code", ["s = '# <torchlint cell 2>'"]), ("code", ["t = 1"]))
    program = Notebook.parse(text).program()
    assert "# <torchlint_ cell 2>" in program.source
    assert [c.source for c in program.split(program.source)] == [
        "s = '# <torchlint cell 2>'",
        "t = 1",
    ]


def test_split_refuses_when_a_separator_or_placeholder_is_lost():
    text = notebook(("code", ["import torch\n", "%time x"]), ("code", ["y = 1"]))
    program = Notebook.parse(text).program()
    with pytest.raises(NotebookError, match="across notebook cells"):
        program.split(program.source.replace("# <torchlint cell 2>\n", ""))
    with pytest.raises(NotebookError, match="magic"):
        program.split(program.source.replace("# <torchlint ipython 0>\n", "\n"))


class _RemoveFirst(Rule):
    """TLX01 remove-me: a test rule whose fix removes `remove_me()` statements."""

    code = "TLX01"
    name = "remove-me"
    fix_safety = FixSafety.SAFE
    tokens = ("remove_me",)

    def check(self, module) -> Iterator[Diagnostic]:
        for stmt in module.module.body:
            if isinstance(
                stmt, cst.SimpleStatementLine
            ) and "remove_me" in module.module.code_for_node(stmt):
                yield self.diagnostic(
                    stmt, "remove me", fix("Remove", Applicability.SAFE, Remove(stmt))
                )


def test_a_fix_that_removes_a_cells_first_statement_falls_back_to_statement_separators(monkeypatch):
    monkeypatch.setattr(
        runner, "_linter", lambda job, codes, given: Linter([_RemoveFirst()], job.settings)
    )
    text = notebook(("code", ["x = 1"]), ("code", lines("remove_me()\ny = 2")), ("code", ["z = 3"]))
    result, new = lint(text, fix=True)
    assert result.error is None
    assert [c["source"] for c in json.loads(new)["cells"]] == [["x = 1"], ["y = 2"], ["z = 3"]]


# ---------------------------------------------------------------------------------------
# Writing back: only the changed sources, byte for byte otherwise


def fixed_sources(text: str) -> list:
    result, new = lint(text, fix=True)
    assert result.error is None, result.error
    return [c["source"] for c in json.loads(new)["cells"]], new


def test_list_and_string_sources_keep_their_form():
    text = notebook(
        ("code", "import torch\nfrom torch.utils.data import DataLoader"),
        ("code", ["loader = DataLoader(ds)"]),
    )
    sources, _ = fixed_sources(text)
    assert isinstance(sources[0], str) and sources[0].startswith("import os\n\nimport torch\n")
    assert sources[0].endswith(
        'NUM_WORKERS = max(1, _CPUS // int(os.environ.get("LOCAL_WORLD_SIZE", "1")) - 1)'
    )
    assert sources[1] == ["loader = DataLoader(ds, num_workers=NUM_WORKERS)"]


@pytest.mark.parametrize(
    "dump",
    [
        lambda d: json.dumps(d, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
        lambda d: json.dumps(d, indent=2, ensure_ascii=False),
        lambda d: json.dumps(d, indent=4, ensure_ascii=True) + "\n",
        lambda d: json.dumps(d, ensure_ascii=False),
        lambda d: (json.dumps(d, indent=1, ensure_ascii=False) + "\n").replace("\n", "\r\n"),
        lambda d: "\ufeff" + json.dumps(d, indent="\t", ensure_ascii=False) + "\n",
    ],
    ids=["jupyter", "colab", "ascii-indent4", "one-line", "crlf", "bom-tabs"],
)
def test_write_back_changes_only_the_changed_sources(dump):
    data = json.loads(notebook(*LOADER_CELLS))
    data["cells"][0]["source"] = ["# Café ✓ — ünïcode"]
    data["cells"][3]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["é\n"]}]
    data["metadata"] = {
        "colab": {"provenance": []},
        "accelerator": "GPU",
        "z": 1,
        "a": [1, 2.50, None],
    }
    text = dump(data)
    nb = Notebook.parse(text.removeprefix("\ufeff"))
    new = nb.with_sources({4: "%matplotlib inline\nloader = 1", 2: ""})
    expected = json.loads(text.removeprefix("\ufeff"))
    expected["cells"][3]["source"] = ["%matplotlib inline\n", "loader = 1"]
    expected["cells"][1]["source"] = []
    assert json.loads(new) == expected
    assert list(json.loads(new)) == list(expected)  # key order
    # with the two changed values cut out, the texts are identical
    assert _without_sources(new, (2, 4)) == _without_sources(text.removeprefix("\ufeff"), (2, 4))
    if "\r\n" in text:
        assert "\n" not in new.replace("\r\n", "")
    if "\\u00e9" in text:
        assert "é" not in new
    assert nb.with_sources({}) == text.removeprefix("\ufeff")


def _without_sources(text: str, cells: tuple[int, ...]) -> str:
    spans = source_spans(text)
    for number in sorted(cells, reverse=True):
        start, end, _ = spans[number]
        text = text[:start] + text[end:]
    return text


def test_an_empty_source_list_is_filled_with_the_files_indentation():
    text = notebook(("code", []), ("code", ["x = 1"]))
    new = Notebook.parse(text).with_sources({1: "a\nb"})
    assert '   "source": [\n    "a\\n",\n    "b"\n   ]' in new


def test_a_notebook_with_magics_and_nothing_to_fix_round_trips_exactly():
    path = NOTEBOOKS / "magics_clean.ipynb"
    text = path.read_text(encoding="utf-8")
    result, new = lint(text, fix=True)
    assert result.error is None and result.violations == [] and new == text


# ---------------------------------------------------------------------------------------
# Errors and non-Python notebooks


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "invalid notebook: not valid JSON"),
        ("[]", "invalid notebook: no `cells` list"),
        ('{"worksheets": [], "nbformat": 3}', "nbformat 3 notebooks are not supported"),
        (
            '{"cells": [{"cell_type": "code", "source": 3}], "nbformat": 4}',
            "invalid notebook: cell 1 has a malformed",
        ),
    ],
)
def test_invalid_notebooks_are_clear_errors(text, message):
    result, new = lint(text)
    assert result.error is not None and result.error.startswith(message) and new == text


def test_a_syntax_error_names_the_cell():
    text = notebook(*LOADER_CELLS, ("code", lines("x = 1\nif x\n    pass")))
    result, new = lint(text, fix=True)
    assert result.error == "syntax error in cell 5 at 2:5: expected ':'"
    assert new == text


def test_a_broken_cell_is_reported_and_the_other_cells_still_analysed():
    """The broken cell sits between the imports and the loader: it is left out (opaque),
    and the loader in the cell after it is still found, in its cell's coordinates."""
    broken = ("code", lines("%time x = 1\nfor x in y\n    pass"))
    cells = (*LOADER_CELLS[:2], broken, *LOADER_CELLS[2:])
    for fixing in (False, True):
        result, new = lint(notebook(*cells), fix=fixing)
        assert result.error == "syntax error in cell 3 at 2:11: expected ':'"
        assert new == notebook(*cells)  # never fixed around a broken cell
        assert result.fixed == []
        [v] = result.violations
        assert (v.cell, v.line, v.column) == (5, 3, 10)


def test_every_broken_cell_is_named_and_cell_positions_are_their_own():
    cells = (
        ("code", lines("x = (")),
        *LOADER_CELLS,
        ("code", lines("y = 1\n  z = 2")),
    )
    result, _ = lint(notebook(*cells))
    assert result.error == (
        "syntax error in cell 1 at 1:5: '(' was never closed; "
        "syntax error in cell 6 at 2:2: unexpected indent"
    )
    assert [(v.cell, v.line) for v in result.violations] == [(5, 3)]


def test_a_broken_first_cell_lets_the_next_cell_hold_future_imports():
    cells = (
        ("code", lines("def f(:")),
        ("code", lines("from __future__ import annotations\nimport torch")),
        ("code", lines("from torch.utils.data import DataLoader\nloader = DataLoader(ds)")),
    )
    result, _ = lint(notebook(*cells))
    assert result.error == "syntax error in cell 1 at 1:7: invalid syntax"
    assert [(v.cell, v.line) for v in result.violations] == [(3, 2)]


def test_notebooks_in_other_languages_are_skipped():
    text = notebook(*LOADER_CELLS, language_info={"name": "R"})
    result, _ = lint(text)
    assert result.error is None and result.violations == []


def test_vscode_cells_in_other_languages_are_skipped():
    data = json.loads(notebook(*LOADER_CELLS))
    data["cells"][3]["metadata"] = {"vscode": {"languageId": "sql"}}
    assert Notebook.parse(json.dumps(data)).program().cells == [2]


def test_program_of_an_empty_notebook():
    program: Program = Notebook.parse(notebook()).program()
    assert program.source == "" and program.split("") == []


# ---------------------------------------------------------------------------------------
# The command line, in a real subprocess


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for path in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def test_check_shows_cell_positions(work):
    result = run_cli("check", *SELECT, "colab_mnist.ipynb", cwd=work)
    assert result.returncode == 1, result.stderr
    assert "colab_mnist.ipynb:cell 7:8:16: TL201 DataLoader without `num_workers`" in result.stdout
    assert "colab_mnist.ipynb:cell 7:9:" not in result.stdout  # the test loader trains nothing
    assert (
        "8 | train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=True)"
        in result.stdout
    )
    concise = run_cli(
        "check", *SELECT, "--output-format", "concise", "cifar10_widgets.ipynb", cwd=work
    )
    assert concise.stdout.splitlines()[0].startswith(
        "cifar10_widgets.ipynb:cell 6:5:16: TL201 `num_workers=0` on a training DataLoader"
    )


def test_check_json_has_the_cell(work):
    result = run_cli("check", *SELECT, "--output-format", "json", "colab_mnist.ipynb", cwd=work)
    items = json.loads(result.stdout)
    assert [(i["cell"], i["location"]["row"], i["location"]["column"]) for i in items] == [
        (7, 8, 16),
    ]
    edits = items[0]["fix"]["edits"]
    # the definition goes after the imports, in cell 3; the pinned batches' copies, in
    # cell 11, become non-blocking with the workers and pinning of cell 7
    assert {e["cell"] for e in edits} == {3, 7, 11}
    plain = run_cli("check", *SELECT, "--output-format", "json", "-", input="x = 1\n", cwd=work)
    assert all(i["cell"] is None for i in json.loads(plain.stdout))


@pytest.mark.parametrize("fixed", FIXED, ids=lambda p: p.name.removesuffix(".fixed.ipynb"))
def test_fix_writes_the_expected_notebook_and_fixing_again_changes_nothing(work, fixed: Path):
    name = fixed.name.replace(".fixed.ipynb", ".ipynb")
    select = SELECTS.get(name.removesuffix(".ipynb"), SELECT)
    result = run_cli("fix", "--unsafe-fixes", *select, name, cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    if os.environ.get("UPDATE_FIXTURES"):
        fixed.write_bytes((work / name).read_bytes())
    assert (work / name).read_bytes() == fixed.read_bytes()
    again = run_cli("fix", "--unsafe-fixes", *select, name, cwd=work)
    assert again.returncode == 0 and "All checks passed!" in again.stdout
    assert (work / name).read_bytes() == fixed.read_bytes()


def test_fix_keeps_outputs_and_metadata(work):
    before = json.loads((work / "colab_mnist.ipynb").read_text(encoding="utf-8"))
    run_cli("fix", "--unsafe-fixes", *SELECT, "colab_mnist.ipynb", cwd=work)
    after = json.loads((work / "colab_mnist.ipynb").read_text(encoding="utf-8"))
    assert after["metadata"] == before["metadata"]
    for old, new in zip(before["cells"], after["cells"], strict=True):
        assert {k: v for k, v in old.items() if k != "source"} == {
            k: v for k, v in new.items() if k != "source"
        }
    changed = [
        i + 1
        for i, (o, n) in enumerate(zip(before["cells"], after["cells"], strict=True))
        if o != n
    ]
    assert changed == [3, 7, 11]


def test_a_notebook_with_magics_and_nothing_to_fix_is_left_alone(work):
    before = (work / "magics_clean.ipynb").read_bytes()
    mtime = (work / "magics_clean.ipynb").stat().st_mtime_ns
    result = run_cli("fix", "--unsafe-fixes", *SELECT, "magics_clean.ipynb", cwd=work)
    assert result.returncode == 0 and "All checks passed!" in result.stdout
    assert (work / "magics_clean.ipynb").read_bytes() == before
    assert (work / "magics_clean.ipynb").stat().st_mtime_ns == mtime


def test_diff_shows_changed_cells_and_writes_nothing(work):
    before = (work / "colab_mnist.ipynb").read_bytes()
    result = run_cli("check", "--diff", "--unsafe-fixes", *SELECT, "colab_mnist.ipynb", cwd=work)
    assert result.returncode == 1
    assert "--- colab_mnist.ipynb:cell 3\n+++ colab_mnist.ipynb:cell 3\n" in result.stdout
    assert (
        "+train_loader = DataLoader(" in result.stdout
        and "num_workers=NUM_WORKERS" in result.stdout
    )
    assert (work / "colab_mnist.ipynb").read_bytes() == before


def test_directories_include_notebooks(work):
    result = run_cli("check", *SELECT, "--output-format", "concise", ".", cwd=work)
    assert result.returncode == 1
    files = {line.split(":")[0] for line in result.stdout.splitlines() if ":cell " in line}
    # The .fixed ones are clean; those fixed for other rules (SELECTS: TL202's
    # cell_order, whose loader has workers) have nothing for TL201 either.
    assert files == {"colab_mnist.ipynb", "cifar10_widgets.ipynb"}


def test_stdin_notebook(work):
    text = (work / "colab_mnist.ipynb").read_text(encoding="utf-8")
    args = ("--unsafe-fixes", *SELECT, "--stdin-filename", "colab_mnist.ipynb", "-")
    result = run_cli("fix", *args, input=text, cwd=work)
    assert result.stdout == (NOTEBOOKS / "colab_mnist.fixed.ipynb").read_text(encoding="utf-8")
    check = run_cli(
        "check",
        *SELECT,
        "--output-format",
        "concise",
        "--stdin-filename",
        "nb.ipynb",
        "-",
        input=text,
    )
    assert "nb.ipynb:cell 7:8:16: TL201" in check.stdout


def test_a_syntax_error_in_a_cell_is_one_clear_line_and_the_file_is_untouched(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text(
        notebook(*LOADER_CELLS, ("code", lines("for x in loader\n    pass"))), encoding="utf-8"
    )
    before = path.read_bytes()
    result = run_cli("fix", "--unsafe-fixes", *SELECT, "broken.ipynb", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == ""  # the report says it, in the cell's positions
    assert result.stdout.startswith("broken.ipynb:cell 5:1:16: TL000 SyntaxError: expected ':'\n")
    assert path.read_bytes() == before
    json_report = run_cli("check", *SELECT, "--output-format", "json", "broken.ipynb", cwd=tmp_path)
    assert json_report.stderr.splitlines() == [
        "torchlint: error: broken.ipynb: syntax error in cell 5 at 1:16: expected ':'"
    ]
    [record] = [v for v in json.loads(json_report.stdout) if v["code"] == "TL000"]
    assert (record["cell"], record["location"]) == (5, {"row": 1, "column": 16})


def test_a_broken_cell_with_the_cli_reports_the_others_findings(tmp_path):
    path = tmp_path / "broken.ipynb"
    cells = (("code", lines("x = (")), *TRAINING_CELLS)
    path.write_text(notebook(*cells), encoding="utf-8")
    before = path.read_bytes()
    for command in ("check", "fix"):
        result = run_cli(command, "--unsafe-fixes", *SELECT, "-q", "broken.ipynb", cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr == ""
        assert result.stdout.startswith(
            "broken.ipynb:cell 1:1:5: TL000 SyntaxError: '(' was never closed\n"
        )
        assert "broken.ipynb:cell 5:3:10: TL201" in result.stdout
        assert path.read_bytes() == before


def test_invalid_json_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.ipynb"
    path.write_text('{"cells": [}\n', encoding="utf-8")
    result = run_cli("check", *SELECT, "bad.ipynb", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout.startswith(
        "bad.ipynb:1:1: TL900 invalid notebook: not valid JSON "
        "(Expecting value at line 1, column 12)\n"
    )
    assert path.read_text(encoding="utf-8") == '{"cells": [}\n'


def test_workers_are_not_added_for_a_dataset_the_notebook_defines():
    """Spawned workers (macOS, Windows, Linux from Python 3.14) cannot import a class
    defined in a notebook: TL201 reports the loader and says so, without a fix."""
    text = notebook(
        ("code", lines("import torch\nfrom torch.utils.data import DataLoader, Dataset")),
        (
            "code",
            lines(
                "class Images(Dataset):\n    def __len__(self):\n        return 8\n"
                "    def __getitem__(self, i):\n        return torch.randn(3)"
            ),
        ),
        (
            "code",
            lines(
                "model = torch.nn.Linear(3, 1).cuda()\n"
                "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                "for x in DataLoader(Images(), batch_size=4):\n"
                "    model(x.cuda()).sum().backward()\n    opt.step()"
            ),
        ),
    )
    tl201 = Job(
        codes=("TL201",), settings=Settings(options=default_options()), fix=True, unsafe=True
    )
    result, new = lint_notebook(text, "nb.ipynb", tl201, ["TL201"])
    [finding] = result.violations
    assert finding.cell == 3 and "in a notebook" in finding.message and finding.fix is None
    assert new == text
