"""The language server's parts that need no client: minimal edits and positions in each
encoding, editor settings, the config of each document, notebook errors by cell, the
command that starts it, and the projects of the documents."""

from __future__ import annotations

import gc
import itertools
import math
import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types

from torchlint.config.load import ConfigError
from torchlint.lint.incremental import Buffer
from torchlint.results import ANALYSIS_ERROR, FileError
from torchlint.run.rounds import MAX_ROUNDS
from torchlint.server.analysis import (
    Buffers,
    Cell,
    cell_problems,
    fix_all_python,
    lint_cells,
    lint_python,
)
from torchlint.server.lsp import DEBOUNCE_S, _collect, _paused, pause
from torchlint.server.projects import Opened, Projects
from torchlint.server.settings import Configs, EditorSettings, setup
from torchlint.server.text import UTF8, UTF16, UTF32, Lines, minimal_edits

from .conftest import LOADER, ROOT, run_cli
from .lsp_client import apply_edits

ENCODINGS = (UTF8, UTF16, UTF32)
ASTRAL = "\U0001d535"  # outside the BMP: 4 UTF-8 bytes, 2 UTF-16 units
texts = st.lists(st.sampled_from(["a", "b", " ", "\n", "\r\n", "\r", "é", ASTRAL])).map("".join)


@given(old=texts, new=texts)
def test_minimal_edits_make_the_new_text_in_every_encoding(old, new):
    replacements = minimal_edits(old, new)
    assert all(a.end <= b.start for a, b in itertools.pairwise(replacements))
    for encoding in ENCODINGS:
        lines = Lines(old, encoding)
        edits = [
            types.TextEdit(
                types.Range(
                    types.Position(*lines.at_offset(r.start)),
                    types.Position(*lines.at_offset(r.end)),
                ),
                r.text,
            )
            for r in replacements
        ]
        assert apply_edits(old, edits, encoding) == new


def test_minimal_edits_touch_only_what_changed():
    old = "a = 1\nloader = DataLoader(ds)\nb = 2\n"
    new = "a = 1\nloader = DataLoader(ds, pin_memory=True)\nb = 2\n"
    (edit,) = minimal_edits(old, new)
    assert (old[: edit.start], edit.text, old[edit.end :]) == (
        "a = 1\nloader = DataLoader(ds",
        ", pin_memory=True",
        ")\nb = 2\n",
    )
    assert minimal_edits(old, old) == []


@pytest.mark.parametrize(("encoding", "units"), [(UTF8, 11), (UTF16, 8), (UTF32, 7)])
def test_positions_count_the_clients_units(encoding, units):
    lines = Lines(f's = "é{ASTRAL}"\r\nx\n', encoding)
    assert lines.position(0, 7) == (0, units)  # before the closing quote
    assert lines.position(0, 99) == lines.position(0, 8)  # clamped to the line's text
    assert lines.position(5, 0) == (2, 0)  # past the end: the end of the text
    assert Lines("x", encoding).position(3, 0) == (0, 1)


def test_editor_settings_are_checked_like_the_config():
    flat = EditorSettings.parse(
        {"select": ["TL2"], "extendSelect": ["TL501"], "unsafe-fixes": True}
    )
    nested = EditorSettings.parse({"torchlint": {"ignore": ["TL201"]}, "python": {"x": 1}})
    assert (flat.select, flat.extend_select, flat.unsafe_fixes) == (("TL2",), ("TL501",), True)
    assert nested.ignore == ("TL201",) and nested.select is None
    assert EditorSettings.parse(None) == EditorSettings.parse({}) == EditorSettings()
    for bad, message in [
        ({"ignroe": []}, "unknown setting `ignroe`"),
        ({"select": "TL201"}, "must be a list"),
        ({"ignore": ["TL999"]}, "unknown rule selector"),
        ({"unsafeFixes": "yes"}, "true or false"),
        (["TL201"], "must be an object"),
    ]:
        with pytest.raises(ConfigError, match=message):
            EditorSettings.parse(bad)


def test_each_document_gets_its_nearest_config_and_the_editor_settings_on_top(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.torchlint]\n"
        'ignore = ["TL202"]\n'
        'extend-exclude = ["generated"]\n'
        'per-file-ignores = { "tests/*" = ["TL201"] }\n'
    )
    (tmp_path / "tests").mkdir()
    configs = Configs()
    plain = setup(configs, EditorSettings(), tmp_path / "train.py", tmp_path)
    assert plain is not None and not plain.unsafe
    assert "TL201" in plain.codes and "TL202" not in plain.codes and "TL503" not in plain.codes
    in_tests = setup(configs, EditorSettings(), tmp_path / "tests" / "t.py", tmp_path)
    assert in_tests is not None and "TL201" not in in_tests.codes
    assert setup(configs, EditorSettings(), tmp_path / "generated" / "t.py", tmp_path) is None

    editor = EditorSettings(select=("TL2",), ignore=("TL203",), unsafe_fixes=True)
    chosen = setup(configs, editor, tmp_path / "train.py", tmp_path)
    assert chosen is not None and chosen.unsafe
    assert set(chosen.codes) == {"TL201", "TL204", "TL205", "TL206"}  # TL202: the config ignores it

    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nunsafe-fixes = true\n")
    again = setup(configs, EditorSettings(), tmp_path / "train.py", tmp_path)
    assert again is not None and again.unsafe and "TL202" in again.codes  # read again
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nunsafe-fixes = 1\n")
    with pytest.raises(ConfigError, match=r"pyproject\.toml: `unsafe-fixes` must be true or false"):
        setup(configs, EditorSettings(), tmp_path / "train.py", tmp_path)


def test_the_projects_torch_version_reaches_the_editor_too(tmp_path):
    """As on the command line: the oldest torch the project's metadata declares."""
    (tmp_path / "requirements.txt").write_text("torch>=1.8\n")
    chosen = setup(Configs(), EditorSettings(), tmp_path / "train.py", tmp_path)
    assert chosen is not None and chosen.settings.target_torch == (1, 8)


def test_a_document_without_a_config_is_linted_with_the_defaults(tmp_path):
    chosen = setup(Configs(), EditorSettings(), None, tmp_path)
    assert chosen is not None and "TL201" in chosen.codes and "TL503" not in chosen.codes


def test_notebook_errors_are_placed_in_their_cells(tmp_path):
    cells = [
        Cell("# Data\n", python=False),
        Cell("import torch\nx = (\n", python=True),
        Cell(LOADER, python=True),
        Cell("%%bash\necho hi\n", python=True),
        Cell("def f(:\n    pass\n", python=True),
    ]
    chosen = setup(Configs(), EditorSettings(), None, tmp_path)
    assert chosen is not None
    report = lint_cells(cells, "nb.ipynb", chosen)
    assert [(v.code, v.cell, v.line) for v in report.violations] == [("TL201", 3, 3)]
    assert [(p.cell, p.line, p.column) for p in report.problems] == [(2, 2, 5), (5, 1, 7)]
    assert all(p.message.startswith("SyntaxError: ") for p in report.problems)
    too_deep = FileError(ANALYSIS_ERROR, "expression nested too deeply to analyse", cell=4)
    assert cell_problems([too_deep], cells) == [
        replace(report.problems[0], message="expression nested too deeply to analyse", cell=4,
                line=1, column=1)
    ]  # fmt: skip
    other = FileError(ANALYSIS_ERROR, "something else")
    assert cell_problems([other], cells)[0].cell == 2  # the first Python cell


def test_a_notebook_edited_cell_by_cell_is_linted_as_a_whole_one(tmp_path):
    """The server's buffer re-parses only the cells (statements) an edit touched."""
    chosen = setup(Configs(), EditorSettings(), None, tmp_path)
    assert chosen is not None
    functions = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(12))
    cells = [Cell("import torch\n", True), Cell(functions, True), Cell(LOADER, True)]
    buffer = Buffer()
    versions = [
        cells,
        [cells[0], cells[1], Cell(LOADER.replace("batch_size=64", "batch_size=8"), True)],
        [cells[0], Cell(functions.replace("x + 5", "x * 5"), True), cells[2]],
        [cells[0], Cell(functions.replace("x + 5", "(x"), True), cells[2]],  # broken
        [Cell("import torch  # first\n", True), cells[1], cells[2]],
    ]
    reused = 0
    for version in versions:
        before = buffer.module.body if buffer.module is not None else ()
        expected = lint_cells(version, "nb.ipynb", chosen)
        assert lint_cells(version, "nb.ipynb", chosen, buffer) == expected
        assert expected.violations
        assert buffer.module is not None
        reused += sum(any(s is t for t in before) for s in buffer.module.body)
    assert reused >= 2 * 12  # the functions' cell, kept while the loader's changed...


@pytest.mark.slow
def test_the_server_command():
    result = run_cli("server", "--help")
    assert result.returncode == 0 and "language server" in result.stdout
    probe = (
        "import sys; sys.modules['pygls'] = None\n"
        "from torchlint.cli import main\n"
        "sys.argv = ['torchlint', 'server']\n"
        "main()\n"
    )
    missing = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert missing.returncode == 2
    assert "pip install 'torchlint[server]'" in missing.stderr


def test_unfixable_rules_offer_no_fix_in_the_editor(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nunfixable = ["TL201"]\n')
    chosen = setup(Configs(), EditorSettings(unsafe_fixes=True), tmp_path / "t.py", tmp_path)
    assert chosen is not None and "TL201" in chosen.unfixable
    (v,) = lint_python(LOADER, str(tmp_path / "t.py"), chosen).violations
    assert v.code == "TL201" and v.fix is None
    assert fix_all_python(LOADER, str(tmp_path / "t.py"), chosen) == LOADER


def test_the_server_keeps_the_trees_of_the_documents_edited_last():
    buffers = Buffers(size=2)
    first = buffers.get("a")
    assert buffers.get("a") is first
    buffers.get("b")
    buffers.get("a")  # "a" was used last: "b" goes first
    buffers.get("c")
    assert list(buffers.held) == ["a", "c"]
    assert buffers.get("b") is not first and list(buffers.held) == ["c", "b"]
    buffers.drop("c")
    buffers.drop("unknown")
    assert list(buffers.held) == ["b"]


def test_the_collector_waits_while_the_engine_works():
    seen = []

    def work(value: int) -> int:
        seen.append(gc.isenabled())
        return value

    try:
        assert _paused(work, 3) == 3 and not gc.isenabled()
    finally:
        _collect()
    assert seen == [False] and gc.isenabled()


# -- the projects of the documents ---------------------------------------------------------


def _settle(opened: Opened) -> None:
    """A project's rounds, a file at a time, as the server runs them between lints."""
    for round_ in range(MAX_ROUNDS):
        batches = opened.batches(round_)
        if not batches:
            return
        for batch in batches:
            opened.keep(batch, [opened.analyse(task) for task in batch])


def _codes(report) -> set[tuple[str, int]]:
    return {(v.code, v.line) for v in report.violations}


def test_a_project_knows_its_files_as_saved(tmp_path):
    """train.py's loader feeds the GPU in engine.py; engine.py's buffer with `train`
    renamed tells the project nothing (its summaries stay those of the files on disk),
    until it is saved and read again: train.py's last lint is then stale, and a lint
    now is told otherwise."""
    from .test_server_project import ENGINE, FILES, PINNED, TRAIN

    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    for name, text in FILES.items():
        (root / name).write_text(text)
    configs, editor = Configs(), EditorSettings()
    chosen = setup(configs, editor, root / "train.py", root)
    assert chosen is not None
    opened = Projects(configs, cache=False).find(root / "train.py", root, editor)
    assert opened is not None
    _settle(opened)
    env = opened.environment(root / "train.py")
    pinned = (PINNED[0], PINNED[1] + 1)
    assert pinned in _codes(lint_python(TRAIN, str(root / "train.py"), chosen, env=env))
    told = env.answers

    renamed = ENGINE.replace("def train(", "def fit(")
    saved = {k: s.to_json() for k, s in opened.project.summaries.items()}
    engine = opened.environment(root / "engine.py")
    lint_python(renamed, str(root / "engine.py"), chosen, env=engine)
    opened.keep_fetched()
    assert {k: s.to_json() for k, s in opened.project.summaries.items()} == saved
    assert not opened.stale(root / "train.py", told, True)

    (root / "engine.py").write_text(renamed)
    assert opened.reread({root / "engine.py"}, set())
    _settle(opened)
    assert opened.stale(root / "train.py", told, True)
    env = opened.environment(root / "train.py")
    assert _codes(lint_python(TRAIN, str(root / "train.py"), chosen, env=env)) == set()
    assert not (root / ".torchlint_cache").exists()  # cache=False: nothing written


def test_what_a_change_on_disk_asks_of_a_project(tmp_path):
    """A file of the project changed is read again; one created or deleted, one it did
    not know, or a package's `__init__.py` (re-exports) opens the project again (False);
    files outside it, or that its config excludes (a virtual environment), change
    nothing."""
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    for name in ("train.py", "pkg/__init__.py", "pkg/engine.py"):
        (root / name).write_text("import torch\n")
    configs, editor = Configs(), EditorSettings()
    opened = Projects(configs, cache=False).find(root / "train.py", root, editor)
    assert opened is not None
    venv, outside = root / ".venv" / "lib" / "site.py", tmp_path / "elsewhere.py"
    assert opened.reread({root / "pkg" / "engine.py", venv, outside}, {venv, outside})
    assert not opened.reread({root / "pkg" / "__init__.py"}, set())
    assert not opened.reread(set(), {root / "pkg" / "new.py"})
    assert not opened.reread({root / "unknown.py"}, set())
    assert not opened.reread(set(), {root / "train.py"})  # deleted


def test_a_file_outside_every_workspace_folder_has_no_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    assert Projects(Configs()).find(tmp_path / "train.py", None, EditorSettings()) is None


def test_a_change_after_a_pause_is_linted_at_once_one_within_a_burst_waits():
    assert pause(100.0, 100.0 - 2 * DEBOUNCE_S) == 0.0  # typed after a pause
    assert pause(100.0, -math.inf) == 0.0  # the document's first change
    assert pause(100.0, 100.0 - DEBOUNCE_S / 2) == DEBOUNCE_S  # within a burst


def test_the_hover_is_markdown_unless_the_client_shows_plain_text_only():
    from types import SimpleNamespace

    from torchlint.server.protocol import _markup

    def client(formats):
        hover = types.HoverClientCapabilities(content_format=formats)
        caps = types.ClientCapabilities(
            text_document=types.TextDocumentClientCapabilities(hover=hover)
        )
        return SimpleNamespace(client_capabilities=caps)

    assert _markup(client([types.MarkupKind.PlainText])) == types.MarkupKind.PlainText
    assert _markup(client([types.MarkupKind.Markdown, types.MarkupKind.PlainText])) == "markdown"
    assert _markup(client(None)) == types.MarkupKind.Markdown
    assert _markup(SimpleNamespace(client_capabilities=types.ClientCapabilities())) == "markdown"
