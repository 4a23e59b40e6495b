"""A fix's text edits (JSON, SARIF, rdjson, --show-fixes) are derived from the positions
of the nodes it edits, not by generating the module again: applied to the source, they
must give exactly what applying the fix to the tree gives."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchlint.fixes import (
    Applicability,
    Definition,
    Fix,
    Import,
    InsertAfter,
    InsertBefore,
    Remove,
    Replace,
    apply_fixes,
    fix,
    text_edits,
)
from torchlint.lint.linter import Linter, _positions, applies
from torchlint.lint.parser import parse
from torchlint.results import TextEdit
from torchlint.text.positions import NodePositions
from torchlint.text.source import split_lines

from .conftest import FIXTURES
from .test_properties import LINTER, script

# Every finding carries its fix, a low-impact one's too.
EVERY_FIX = Linter(LINTER.rules, LINTER.settings, low_impact=True)


def apply_edits(text: str, edits: tuple[TextEdit, ...]) -> str:
    lines = split_lines(text)
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        assert edit.start[1] == edit.end[1] == 1  # whole lines, as reporters show them
        lines[edit.start[0] - 1 : edit.end[0] - 1] = [edit.content]
    return "".join(lines)


def assert_every_fix_matches(source: str) -> int:
    """Every fix of every rule on `source`: its edits give what applying it gives."""
    rules = applies(LINTER.rules, source)
    if not rules:
        return 0
    module = parse(source)
    found, _ = EVERY_FIX._diagnostics(module, "t.py", rules)
    diagnostics = [d for d in found if d.fix]
    positions = _positions(module, diagnostics, with_edits=True)
    for d in diagnostics:
        assert d.fix is not None
        expected = apply_fixes(module, [d.fix])
        assert apply_edits(source, text_edits(module, source, positions, d.fix)) == expected, d
    return len(diagnostics)


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/*.py")), ids=lambda p: str(p.parent.name))
def test_fixture_fixes(path: Path):
    source = path.read_text(encoding="utf-8")
    assert_every_fix_matches(source)
    assert_every_fix_matches(source.rstrip("\n"))  # libcst drops and adds the last newline


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(script(), st.booleans())
def test_generated_scripts(source, strip_last_newline):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_every_fix_matches(source.rstrip("\r\n") if strip_last_newline else source)


def edits_of(source: str, make: Callable[[cst.Module], Fix]) -> tuple[TextEdit, ...]:
    module = cst.parse_module(source)
    the_fix = make(module)
    positions = NodePositions(module, [*(e.node for e in the_fix.edits), *module.body])
    edits = text_edits(module, source, positions, the_fix)
    assert apply_edits(source, edits) == apply_fixes(module, [the_fix])
    return edits


def first(module: cst.Module, kind: type[cst.CSTNode]) -> cst.CSTNode:
    found: list[cst.CSTNode] = []

    class Find(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind) and not found:
                found.append(node)
            return not found

    module.visit(Find())
    return found[0]


def safe(*edits, **kw) -> Fix:
    return fix("t", Applicability.SAFE, *edits, **kw)


def test_a_replacement_is_one_line_edit_with_the_new_code():
    source = "import torch\n\n\ndef f():\n    x = g(a, b)\n    return x\n"
    call = lambda m: first(m, cst.Call)  # noqa: E731
    edits = edits_of(source, lambda m: safe(Replace(call(m), cst.parse_expression("h()"))))
    assert edits == (TextEdit((5, 1), (6, 1), "    x = h()\n"),)


def test_a_replacement_gets_what_its_parent_passes():
    """A new argument without a comma of its own is given the parent's default comma,
    a new `if` in an `elif`'s place is spelled `elif`."""
    edits_of("f(a, b)\n", lambda m: safe(Replace(first(m, cst.Arg), cst.Arg(cst.Name("z")))))
    source = "if a:\n    pass\nelif b:\n    pass\n"

    def elif_to(m):
        inner = first(m, cst.If).orelse
        return safe(Replace(inner, inner.with_changes(test=cst.Name("c"))))

    assert edits_of(source, elif_to) == (TextEdit((3, 1), (4, 1), "elif c:\n"),)


def test_inserts_keep_their_block_and_order():
    source = "for x in y:\n    # a comment\n    a()\n    b()\nc()\n"

    def around(m):
        loop = first(m, cst.For)
        a, b = loop.body.body
        new = cst.parse_statement("n()\n")
        return safe(InsertAfter(a, (new,)), InsertBefore(b, (new,)), InsertBefore(a, (new,)))

    assert apply_edits(source, edits_of(source, around)) == (
        "for x in y:\n    n()\n    # a comment\n    a()\n    n()\n    n()\n    b()\nc()\n"
    )


def test_removing_a_whole_block_leaves_pass():
    source = "import torch\nwhile True:\n    a()\n    b()\nc()\n"

    def empty(m):
        return safe(*(Remove(s) for s in first(m, cst.While).body.body))

    assert apply_edits(source, edits_of(source, empty)).endswith("while True:\n    pass\nc()\n")
    edits_of(source, lambda m: safe(*(Remove(s) for s in m.body)))  # the module too


def test_removing_statements_keeps_the_blank_lines_above_them():
    """The blank line that separated the removed statements from the imports still
    separates what follows (isort's I001 wants it); their comments go with them."""
    source = "import os\n\n# set\nos.environ['A'] = '1'\nb = 2\n\n\nc = 3\n"

    def drop(m):
        return safe(Remove(m.body[1]))

    assert apply_edits(source, edits_of(source, drop)) == "import os\n\nb = 2\n\n\nc = 3\n"

    def drop_two(m):
        return safe(Remove(m.body[1]), Remove(m.body[2]))

    assert apply_edits(source, edits_of(source, drop_two)) == "import os\n\n\nc = 3\n"


@pytest.mark.parametrize("edit", ["replace", "insert after", "remove"])
def test_the_last_statement_of_a_file_without_a_last_newline(edit):
    source = "import torch\nx = 1\ny = f(x)"

    def make(m):
        last = m.body[-1]
        if edit == "replace":
            return safe(Replace(first(m, cst.Call), cst.parse_expression("g()")))
        if edit == "insert after":
            return safe(InsertAfter(last, (cst.parse_statement("z = 2\n"),)))
        return safe(Remove(last))

    edits_of(source, make)


def test_imports_and_definitions_go_where_applying_puts_them():
    source = '"""Doc."""\nimport torch\n# about x\nx = f(1)\n'

    def add(m):
        return safe(
            Replace(first(m, cst.Call), cst.parse_expression("f(N)")),
            imports=[Import("os")],
            definitions=[Definition("N", "N = os.cpu_count()\n")],
        )

    assert edits_of(source, add) == (
        TextEdit((2, 1), (2, 1), "import os\n\n"),  # a group of its own, as isort sorts it
        TextEdit((3, 1), (3, 1), "\nN = os.cpu_count()\n"),
        TextEdit((4, 1), (5, 1), "x = f(N)\n"),
    )


def test_an_edit_that_changes_an_import_changes_what_is_added():
    """`import os as o` becomes `import os`: the fix's `import os` is then there."""
    source = "import os as o\nx = f()\n"

    def unalias(m):
        alias = first(m, cst.ImportAlias)
        return safe(Replace(alias, alias.with_changes(asname=None)), imports=[Import("os")])

    assert edits_of(source, unalias) == (TextEdit((1, 1), (2, 1), "import os\n"),)


def test_fixes_the_splicing_leaves_to_applying():
    """A top-level statement inserted with a definition, and overlapping edits."""
    source = "import torch\nmodel = Net()\ntrain(model)\n"

    def insert_and_define(m):
        stmt = cst.parse_statement("model = model.to(device)\n")
        return safe(
            InsertAfter(m.body[1], (stmt,)), definitions=[Definition("device", "device = 0\n")]
        )

    def overlapping(m):
        call = first(m, cst.Call)
        return safe(Replace(call, cst.parse_expression("Gpu()")), Replace(call.func, cst.Name("A")))

    edits_of(source, insert_and_define)
    edits_of(source, overlapping)


# -- added imports go where isort (ruff's I001, default settings) puts them -----------

TORCH = Import("torch")
OS, SYS = Import("os"), Import("sys")
SAMPLER = Import("torch.utils.data", "DistributedSampler")
IMPORT_CASES = {
    "a standard-library group of its own, above the others": (
        '"""Doc."""\n\nimport torch\n\nx = f()\n',
        [OS],
        '"""Doc."""\n\nimport os\n\nimport torch\n\nx = f()\n',
    ),
    "sorted into the standard-library group": (
        "import argparse\nimport sys\n\nimport torch\n\nx = f()\n",
        [OS],
        "import argparse\nimport os\nimport sys\n\nimport torch\n\nx = f()\n",
    ),
    "last in its group, before the next group's blank line": (
        "import argparse\n\nimport torch\n\nx = f()\n",
        [OS],
        "import argparse\nimport os\n\nimport torch\n\nx = f()\n",
    ),
    "straight imports before `from` imports": (
        "import os\nfrom pathlib import Path\n\nx = f()\n",
        [SYS],
        "import os\nimport sys\nfrom pathlib import Path\n\nx = f()\n",
    ),
    "below `from __future__`": (
        "from __future__ import annotations\n\nimport torch\n\nx = f()\n",
        [OS],
        "from __future__ import annotations\n\nimport os\n\nimport torch\n\nx = f()\n",
    ),
    "two at one place, sorted": (
        "import torch\n\nx = f()\n",
        [SYS, OS],
        "import os\nimport sys\n\nimport torch\n\nx = f()\n",
    ),
    "a third-party group after a standard-library block": (
        "import os\n\nx = f()\n",
        [TORCH],
        "import os\n\nimport torch\n\nx = f()\n",
    ),
    "beside its package, not in a later first-party group": (
        "import os\n\nimport torch\n\nimport mypkg\n\nx = f()\n",
        [SAMPLER],
        "import os\n\nimport torch\nfrom torch.utils.data import DistributedSampler\n\n"
        "import mypkg\n\nx = f()\n",
    ),
    "a name joins the `from` import of its module": (
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\nx = f()\n",
        [SAMPLER],
        "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler, TensorDataset"
        "\n\nx = f()\n",
    ),
    "and is wrapped when the line gets too long": (
        "from torch.utils.data import DataLoader, Dataset, TensorDataset, default_collate\n\n"
        "x = f()\n",
        [SAMPLER],
        "from torch.utils.data import (\n    DataLoader,\n    Dataset,\n    DistributedSampler,\n"
        "    TensorDataset,\n    default_collate,\n)\n\nx = f()\n",
    ),
    "not into an import with `as` names": (
        "from torch.utils.data import DataLoader as DL\n\nx = f()\n",
        [SAMPLER],
        "from torch.utils.data import DataLoader as DL\n"
        "from torch.utils.data import DistributedSampler\n\nx = f()\n",
    ),
    "the first import: one blank line after it": (
        '"""Doc."""\n\nx = f()\n',
        [OS],
        '"""Doc."""\n\nimport os\n\nx = f()\n',
    ),
    "the first import: two blank lines before a function": (
        "def f():\n    pass\n",
        [OS],
        "import os\n\n\ndef f():\n    pass\n",
    ),
}


@pytest.mark.parametrize("name", list(IMPORT_CASES))
def test_added_imports_go_where_isort_puts_them(name):
    source, imports, expected = IMPORT_CASES[name]
    edits_of(source, lambda m: safe(imports=imports))  # the text edits agree
    assert apply_fixes(cst.parse_module(source), [safe(imports=imports)]) == expected


def test_ruffs_isort_accepts_every_import_placement(tmp_path):
    """The sources are sorted as ruff wants them (I001), and so is every result."""
    for i, (source, _, expected) in enumerate(IMPORT_CASES.values()):
        (tmp_path / f"case{i}.py").write_text(source)
        (tmp_path / f"case{i}_fixed.py").write_text(expected)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--isolated",
            "--no-cache",
            "--select",
            "I001",
            "--config",
            "lint.isort.known-first-party = ['mypkg']",
            "--output-format",
            "concise",
            ".",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
