"""`torchlint explain PATH[:LINE]`: what the analysis knows at a line, the file checked as
`check` checks it, with its project (issue 44, "why was this not flagged?").

In-process on the fixtures (the API, and the command through typer's runner), and once
through the real command in a subprocess."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import libcst as cst
import pytest

from torchlint.cli.check import plan
from torchlint.cli.flags import CheckOptions
from torchlint.explain import (
    ExplainError,
    Explanation,
    Finding,
    Place,
    RuleState,
    explain,
    explain_text,
    place,
)
from torchlint.explain.facts import Facts, GpuFacts, NameFacts
from torchlint.explain.render import markdown

from .conftest import FIXTURES, LOADER, run_cli, run_cli_process

ENGINE = FIXTURES / "project" / "engine_layout"
HELPERS = FIXTURES / "project" / "helpers"


@pytest.fixture(autouse=True)
def _one_process(monkeypatch):
    monkeypatch.setenv("TORCHLINT_WORKERS", "1")


def explained(path: Path, line: int | None = None, cell: int | None = None, **options):
    """`explain` at a place, under the plan `check` would make with these options."""
    run_plan = plan(CheckOptions(paths=[str(path)], **options))
    return explain(Place(path, line, cell), run_plan)


def own_project(tmp_path: Path, fixture: Path) -> Path:
    """A fixture copied into a project of its own (beside a pyproject.toml), so that its
    project is not this repository."""
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    return Path(shutil.copy(fixture, tmp_path / fixture.name))


def state(found: Explanation, code: str) -> str:
    return next(r.here for r in found.rules if r.code == code)


def test_a_line_with_a_finding_in_a_step_loop_of_a_function_another_file_calls():
    found = explained(ENGINE / "mypkg" / "engine.py", 12)
    (finding,) = found.findings
    assert (finding.code, finding.column, finding.impact, finding.hidden) == (
        "TL401", 23, "high", []
    )  # fmt: skip
    assert state(found, "TL401") == "reported"
    assert state(found, "TL404") == "no finding"
    facts = found.facts
    assert facts.function is not None and facts.function.name == "train_one_epoch"
    assert facts.function.elsewhere is not None and "train.py" in facts.function.elsewhere.where
    assert [loop.kind for loop in facts.loops] == ["training step loop"]
    assert facts.loops[0].loaders[0].built == "mypkg/data.py"  # what train.py passes
    assert facts.per_step is True and facts.period is None
    assert facts.gpu.uses_gpu


def test_the_device_a_parameter_holds_is_the_projects(tmp_path):
    """`images.to(device)`: CUDA as train.py passes it; the file alone cannot name it."""
    engine = ENGINE / "mypkg" / "engine.py"
    moved = {n.expression: n.moves_to for n in explained(engine, 7).facts.names}
    assert moved["images.to(device)"] == "CUDA where there is one, else the CPU"
    alone = {
        n.expression: n.moves_to for n in explained(own_project(tmp_path, engine), 7).facts.names
    }
    assert alone["images.to(device)"] == "a device the analysis cannot name"


def test_a_hidden_low_impact_finding_and_the_option_that_shows_it():
    engine = ENGINE / "mypkg" / "engine.py"
    (finding,) = explained(engine, 20).findings
    assert (finding.code, finding.impact) == ("TL401", "low")
    assert finding.hidden == ["low impact: shown with --show-low-impact"]
    assert state(explained(engine, 20), "TL401") == "hidden"
    assert explained(engine, 20, show_low_impact=True).findings[0].hidden == []
    assert explained(engine, 20).facts.loops[0].kind == "evaluation loop"


def test_a_finding_of_a_rule_not_selected_is_found_and_says_so():
    (finding,) = explained(ENGINE / "mypkg" / "engine.py", 12, select=["TL501"]).findings
    assert finding.code == "TL401"
    assert finding.hidden == ["TL401 is not selected (--select, --extend-select)"]


def test_a_noqa_comment_hides_a_finding(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    lines = LOADER.splitlines(keepends=True)  # TL201 on its loader, line 3
    lines[2] = lines[2].rstrip("\n") + "  # noqa: TL201\n"
    (tmp_path / "train.py").write_text("".join(lines))
    (finding,) = explained(tmp_path / "train.py", 3).findings
    assert (finding.code, finding.hidden) == ("TL201", ["a noqa comment"])
    assert state(explained(tmp_path / "train.py", 3), "TL201") == "hidden"


def test_a_function_another_file_calls_every_step():
    found = explained(HELPERS / "utils.py", 4)
    assert found.facts.function is not None
    assert found.facts.function.stepped_by == "`train` in engine.py"
    assert found.facts.per_step is True and found.facts.loops == []
    assert state(found, "TL401") == "reported"
    assert found.read.startswith("yes: another file of its project")  # no token of its own


def test_a_cpu_only_file_says_why_it_is_no_gpu_program(tmp_path):
    script = own_project(tmp_path, FIXTURES / "TL201" / "good_cpu_only.py")
    found = explained(script, 9)
    assert not found.facts.gpu.uses_gpu and not found.facts.gpu.presumed_accelerator
    assert found.facts.gpu.why.startswith("no GPU in sight")
    assert found.findings == [] and state(found, "TL201") == "no finding"
    (loader,) = next(n for n in found.facts.names if n.expression == "loader").loaders
    assert loader.arguments == {"batch_size": "100", "num_workers": None, "pin_memory": None}
    assert loader.trains


def test_a_file_no_selected_rule_reads(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "util.py").write_text("def add(a, b):\n    return a + b\n")
    found = explained(tmp_path / "util.py")
    assert found.read.startswith("no: no selected rule's tokens")
    assert {r.here for r in found.rules} == {"did not read the file"}


def test_a_notebook_cell_line(tmp_path):
    notebook = own_project(tmp_path, FIXTURES / "notebooks" / "colab_mnist.ipynb")
    found = explained(notebook, 8, cell=7)
    assert found.text.startswith("train_loader = DataLoader(")
    codes = {(f.code, f.cell, f.line, bool(f.hidden)) for f in found.findings}
    assert codes == {("TL201", 7, 8, False), ("TL202", 7, 8, True)}
    with pytest.raises(ExplainError, match="cell N:LINE"):
        explained(notebook, 8)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("train.py", Place(Path("train.py"))),
        ("train.py:12", Place(Path("train.py"), 12)),
        ("train.py:12:23", Place(Path("train.py"), 12)),  # as reports write it
        ("run.ipynb:cell 3:7", Place(Path("run.ipynb"), 7, 3)),
    ],
)
def test_places(spec, expected):
    assert place(spec) == expected


@pytest.mark.parametrize(
    ("where", "said"),
    [
        ("missing.py:3", "missing.py: no such file"),
        ("ok.py:5", "ok.py: line 5 is out of range (1-2)"),
        ("ok.py:0", "lines and cells are numbered from 1"),
        ("ok.py:cell 1:1", "not a notebook"),
        ("broken.py:1", "broken.py: syntax error at 2:7"),
        (".", "not a file"),
    ],
)
def test_bad_input_is_a_message_and_exit_2(tmp_path, where, said):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "ok.py").write_text("import torch\nx = torch.zeros(3)\n")
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    result = run_cli("explain", "--no-cache", where, cwd=tmp_path)
    assert result.returncode == 2
    assert said in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_an_unknown_output_format_is_refused(tmp_path):
    result = run_cli("explain", "--output-format", "xml", "x.py:1", cwd=tmp_path)
    assert result.returncode == 2 and "unknown output format 'xml'" in result.stderr


def test_text_names_the_finding_the_loop_and_the_caller():
    result = run_cli("explain", "--no-cache", "mypkg/engine.py:12", cwd=ENGINE)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith('mypkg/engine.py:12: print(f"loss {loss.item():.3f}")')
    assert "12:23 TL401 host-sync-in-training-loop (high impact), shown" in out
    assert "in a training step loop (line 6 in `train_one_epoch`)" in out
    assert "called by another file: `main` in train.py" in out
    assert "  reported here: TL401\n" in out


@pytest.mark.slow
def test_the_real_command_prints_json_for_tools():
    result = run_cli_process(
        "explain", "--no-cache", "--output-format", "json", "mypkg/engine.py:20", cwd=ENGINE
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["path"], data["line"], data["cell"]) == ("mypkg/engine.py", 20, None)
    (finding,) = data["findings"]
    assert finding["code"] == "TL401" and finding["hidden"]
    assert data["facts"]["loops"][0]["kind"] == "evaluation loop"
    assert data["facts"]["function"]["name"] == "evaluate"


def passed(found: Explanation, code: str) -> list[str]:
    return next(r.passed for r in found.rules if r.code == code)


def test_a_silent_rule_says_why_it_passed_over_the_line(tmp_path):
    """Each rule that looked at the line and stayed silent says why (`Rule.pass_over`):
    the file's GPU, the loader's facts, a periodic gate."""
    script = own_project(tmp_path, FIXTURES / "TL201" / "good_cpu_only.py")
    assert passed(explained(script, 9), "TL201") == [
        "the file places no work on a GPU, nor does its project with what it builds"
    ]
    (tmp_path / "train.py").write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "device = torch.device('cuda')\n"
        "model = torch.nn.Linear(1000, 1000).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "data = TensorDataset(torch.randn(100, 1000))\n"
        "loader = DataLoader(data, batch_size=256, num_workers=4, pin_memory=True)\n"
        "for step, (x,) in enumerate(loader):\n"
        "    loss = model(x.to(device)).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    if step % 100 == 0:\n"
        "        print(loss.item())\n"
    )
    at_loader = explained(tmp_path / "train.py", 7)
    assert passed(at_loader, "TL201") == ["`num_workers=4`: not 0 on every path it sees (line 7)"]
    assert passed(at_loader, "TL202") == ["`pin_memory` is set (line 7)"]
    assert passed(at_loader, "TL203") == [
        "no loop iterates it again and again (no epoch loop seen) (line 7)"
    ]
    unpinned = explained(own_project(tmp_path, FIXTURES / "TL105" / "good.py"), 20)
    assert passed(unpinned, "TL105") == [
        "its loader does not pin memory: from pageable memory `non_blocking` overlaps "
        "nothing (TL202 says where to pin it) (line 20)"
    ]
    at_print = explained(tmp_path / "train.py", 13)
    assert passed(at_print, "TL401") == ["it runs every N steps, under a periodic gate (line 13)"]
    assert passed(at_print, "TL201") == []  # the loader is not on this line


def test_the_text_says_why_the_rules_stayed_silent(tmp_path):
    script = own_project(tmp_path, FIXTURES / "TL201" / "good_cpu_only.py")
    out = run_cli("explain", f"{script}:9")
    said = out.stdout.split("  why they stayed silent here:\n", 1)[1]
    assert "    TL201: the file places no work on a GPU" in said


def test_a_text_is_explained_as_its_file_is(tmp_path):
    """`explain_text` (the hover's entry) on the text and the findings of a check gives
    what `explain` gives of the file (one analysis), for the text given, not the disk's."""
    script = own_project(tmp_path, FIXTURES / "TL201" / "good_cpu_only.py")
    run_plan = plan(CheckOptions(paths=[str(script)]))
    on_disk = explain(Place(script, 9), run_plan)
    same = explain_text(Place(script, 9), script.read_text(), run_plan, [], name=on_disk.path)
    assert same == on_disk
    text = script.read_text().replace("batch_size=100", "batch_size=8")
    edited = explain_text(Place(script, 9), text, run_plan, [])
    (loader,) = next(n for n in edited.facts.names if n.expression == "loader").loaders
    assert loader.arguments["batch_size"] == "8"
    assert passed(edited, "TL201") == passed(on_disk, "TL201")


def test_the_hover_says_a_hidden_finding_and_where_the_line_runs():
    said = markdown(explained(ENGINE / "mypkg" / "engine.py", 20))
    assert said.startswith("**torchlint**: 1 finding on this line\n")
    assert (
        "- **TL401** host-sync-in-training-loop (low impact), hidden: low impact: shown with "
        "--show-low-impact\n  - `.cpu()` in the evaluation loop blocks"
    ) in said
    assert "\n**Not per step** (not in a training step loop" in said
    assert "\n- in `evaluate` (line 15)\n  - called by another file: `main` in train.py" in said
    assert "\n- in an evaluation loop (line 18 in `evaluate`): `for images" in said
    assert "\n**Names**\n- `out.argmax(1).cpu()`: moves to the CPU\n" in said
    assert "\n**GPU**: yes: `images.to(device)` (line 7)\n" in said
    step = markdown(explained(ENGINE / "mypkg" / "engine.py", 12))
    assert "(high impact), shown\n\n**Runs on every training step**\n" in step
    assert "  - `.item()`" not in step  # a finding shown: its diagnostic says it


def test_the_hover_groups_the_reasons_and_leaves_out_what_has_nothing_to_say():
    facts = Facts(GpuFacts(False, False, True, "no GPU in sight"), per_step=True, period=100)
    facts.names = [NameFacts("device", device="the CPU")]
    no_gpu = "the file places no work on a GPU"
    rules = [
        RuleState("TL001", "a", True, True, "no finding", passed=[no_gpu]),
        RuleState("TL201", "b", True, True, "no finding", passed=[no_gpu, "`num_workers` is set"]),
        RuleState("TL404", "c", True, True, "no finding"),
        RuleState("TL501", "d", True, True, "reported"),
    ]
    finding = Finding("TL501", "d", 3, 1, "high", "a message", [])
    found = Explanation("t.py", 3, None, "x = 1", [finding], "yes", rules, facts)
    assert markdown(found) == (
        "**torchlint**: 1 finding on this line\n"
        "- **TL501** d (high impact), shown\n"
        "\n"
        "**Runs on every 100 steps**\n"
        "- at module level\n"
        "\n"
        "**Names**\n"
        "- `device`: names the CPU\n"
        "\n"
        "**GPU**: no: no GPU in sight\n"
        "\n"
        "**Why the rules stayed silent**\n"
        "- TL001, TL201: the file places no work on a GPU\n"
        "- TL201: `num_workers` is set"
    )
    unread = [RuleState("TL001", "a", False, False, "did not read the file")]
    said = markdown(
        Explanation("t.py", 1, None, "x", [], "no: no tokens", unread, Facts(facts.gpu))
    )
    assert said == (
        "**torchlint**: no finding on this line\n\n**GPU**: no: no GPU in sight\n\n"
        "**Not read by the rules**: no tokens"
    )


def lines_explained(path: Path, run_plan, buffer=None, cell=None, lines=None):
    """The explanation of every line of a file (a notebook's cell) that holds code."""
    text, out = path.read_text(), []
    for line in lines or range(1, len(text.splitlines()) + 1):
        found = explain_text(Place(path, line, cell), text, run_plan, [], buffer=buffer)
        out.append((found.to_json(), markdown(found)))
    return out


@pytest.mark.parametrize(
    ("fixture", "cell", "lines"),
    [
        (ENGINE / "mypkg" / "engine.py", None, None),
        (FIXTURES / "TL401" / "bad.py", None, None),
        (FIXTURES / "notebooks" / "colab_mnist.ipynb", 7, range(1, 10)),
    ],
)
def test_a_line_is_explained_as_with_every_node_positioned(monkeypatch, fixture, cell, lines):
    """At a line, only the statement holding it (and what is read elsewhere) is
    positioned, with the editor buffer's layout or one made for the text: the same
    explanation as with every node of the file positioned."""
    import torchlint.explain as explaining
    from torchlint.explain.where import whole
    from torchlint.lint.incremental import Buffer

    run_plan = plan(CheckOptions(paths=[str(fixture)]))
    buffer = None if cell is not None else Buffer()
    lazy = lines_explained(fixture, run_plan, cell=cell, lines=lines)
    if buffer is not None:
        assert lines_explained(fixture, run_plan, buffer) == lazy
    monkeypatch.setattr(explaining, "at_line", lambda module, *_: whole(module))
    assert lines_explained(fixture, run_plan, cell=cell, lines=lines) == lazy


def test_a_line_generates_only_the_statements_it_reads(tmp_path, monkeypatch):
    """A hover on a line of a long file generates the code of the top-level statement
    holding it and of those its facts and findings point at, never the whole module."""
    from torchlint.lint.incremental import Buffer
    from torchlint.text.libcst_compat import Generation

    helpers = "".join(f"\n\ndef helper_{i}(x):\n    return x * {i}\n" for i in range(60))
    text = (FIXTURES / "TL401" / "bad.py").read_text() + helpers
    script = tmp_path / "train.py"
    script.write_text(text)
    generated: list[type] = []
    real = Generation.generate

    def counted(self, node):
        generated.append(type(node))
        real(self, node)

    monkeypatch.setattr(Generation, "generate", counted)
    run_plan = plan(CheckOptions(paths=[str(script)]))
    line = text.splitlines().index("def helper_30(x):") + 2
    for buffer in (Buffer(), None):
        generated.clear()
        found = explain_text(Place(script, line), text, run_plan, [], buffer=buffer)
        assert found.facts.function is not None and found.facts.function.name == "helper_30"
        assert cst.Module not in generated and 0 < len(generated) < 10
