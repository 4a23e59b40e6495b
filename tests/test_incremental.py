"""`torchlint.lint.incremental.Buffer`: a text parsed again only where it changed gives the
tree, the errors and the findings a parse of the whole text gives."""

from __future__ import annotations

import random

import libcst as cst
import pytest

from torchlint.config.load import instantiate
from torchlint.lint.incremental import Buffer
from torchlint.lint.linter import Linter
from torchlint.lint.parser import InvalidSyntax, LintError, parse
from torchlint.text.positions import NodePositions, layout

from .conftest import FIXTURES, ROOT
from .test_positions import _nodes

# Where a statement's comments and indentation may change owner.
TRICKY = [
    "import torch\n\n\ndef f(x):\n    return x\n    # after the block\n# at the top level\n"
    "\n\nclass C:\n    def g(self):\n        pass\n\n        # deeper\n  # less\nx = 1\n",
    "if a:\n  b = 1\n\n\nfor i in range(3):\n  print(i)\nelse:\n  pass\n\n\nwhile x:\n  y()\n",
    "def f():\n\treturn 1\n\n\n@decorator\ndef g():\n\treturn 2\n\n\ntry:\n\th()\n"
    "except E:\n\tpass\nfinally:\n\tz()\n",
    "x = 1\r\n\r\ndef f():\r\n    return x\r\n\r\n\r\ny = f()\r\n",
    "import os\n\nmatch os.name:\n    case 'nt':\n        pass\n\n\ndef f():\n    return 1\n",
    "def f():\n    return 1\n\n\nz = [\n    1,\n    2,\n]\nprint(z)",
]
SNIPPETS = [
    "",
    "x",
    " ",
    "\n",
    "    ",
    "(",
    ")",
    "# c\n",
    "    # c\n",
    "        # c\n",
    ":",
    "else:\n    pass\n",
    "\n\n",
    "'''",
    "@d\n",
    "8",
    "64",
    "    y = 2\n",
    "def h():\n    pass\n",
    "\t",
    "import os\n",
    "# -*- coding: latin-1 -*-\n",
    "\r\n",
    "  x = 1\n",
    "if q:\n  r()\n",
    "if q:\n\tr()\n",
    "if q: r()\nelse:\n  s()\n",
    "\n        # deeper\n",
]


def _texts() -> list[str]:
    files = sorted(FIXTURES.glob("TL*/*.py"))[::3] + sorted((ROOT / "examples").rglob("*.py"))
    return TRICKY + [p.read_text(encoding="utf-8") for p in files]


def _edit(rng: random.Random, text: str, donors: list[str]) -> str:
    lines = text.splitlines(keepends=True)
    at = rng.randrange(len(lines) + 1)
    kind = rng.random()
    if kind < 0.3:  # lines from another file in place of a few
        donor = rng.choice(donors).splitlines(keepends=True)
        start = rng.randrange(len(donor) + 1)
        lines[at : at + rng.randrange(4)] = donor[start : start + rng.randrange(4)]
        return "".join(lines)
    if kind < 0.45:
        del lines[at : at + rng.randrange(1, 4)]
        return "".join(lines)
    pos = rng.randrange(len(text) + 1)
    return text[:pos] + rng.choice(SNIPPETS) + text[pos + rng.randrange(3) :]


def _whole(text: str) -> cst.Module | InvalidSyntax | LintError:
    try:
        return parse(text)
    except LintError as exc:
        return exc


def _error(exc: LintError) -> tuple:
    return (type(exc), getattr(exc, "line", None), getattr(exc, "column", None), str(exc))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_random_edits_give_the_tree_of_a_whole_parse(seed):
    rng = random.Random(seed)
    texts = _texts()
    reused = 0
    for _ in range(35):
        text = rng.choice(texts)
        buffer = Buffer()
        buffer.parse(text)
        for _ in range(6):
            new = _edit(rng, text, texts)
            expected = _whole(new)
            if isinstance(expected, cst.Module) and expected.code != new:
                break  # text libcst does not give back as it read it (a lone backslash)
            before = buffer.module
            assert before is not None
            try:
                got = buffer.parse(new)
            except LintError as exc:
                assert isinstance(expected, LintError), new
                assert _error(exc) == _error(expected)
                assert buffer.module is before  # the last good tree stays the base
                continue
            assert isinstance(expected, cst.Module), new
            assert got.deep_equals(expected), new
            assert got.code == new
            assert (got.encoding, got.default_indent, got.default_newline) == (
                expected.encoding,
                expected.default_indent,
                expected.default_newline,
            )
            assert buffer.layout == layout(expected, new)
            # Names (those in the statements kept were positioned before: from the cache).
            names = [n for n in _nodes(got) if isinstance(n, cst.Name)]
            ours = NodePositions(got, names, buffer.layout)
            theirs = NodePositions(
                expected, [n for n in _nodes(expected) if isinstance(n, cst.Name)]
            )
            whole = [theirs[n] for n in _nodes(expected) if isinstance(n, cst.Name)]
            assert [ours[n] for n in names] == whole
            reused += sum(any(s is t for t in before.body) for s in got.body)
            text = new
    assert reused > 100  # the buffer does reuse statements (else it would only be slow)


def test_an_edit_parses_only_the_statements_it_touches():
    functions = [f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(20)]
    text = "import torch\n\n\n" + "".join(functions)
    buffer = Buffer()
    old = buffer.parse(text)
    new = buffer.parse(text.replace("x + 7\n", "x * 7\n"))
    same = [i for i, (a, b) in enumerate(zip(old.body, new.body, strict=True)) if a is b]
    # Only the function edited (f7) is parsed again.
    assert same == [i for i in range(len(old.body)) if i != 8]
    assert new.code == text.replace("x + 7\n", "x * 7\n")
    # An import typed at the top, before any block, too (with the function after it:
    # the newline before it may be the one typed).
    top = buffer.parse(new.code.replace("import torch\n", "import torch\nimport os\n"))
    assert all(a is b for a, b in zip(top.body[3:], new.body[2:], strict=True))
    assert top.deep_equals(cst.parse_module(top.code))


def test_a_piece_libcst_cannot_give_back_is_parsed_whole():
    """libcst drops a blank line before comments that end a module: a piece ending so
    (its statement replaced by them) is not spliced."""
    old = "def f():\n    pass\n\n\nx = 1\ny = 2\nz = 3\n"
    new = old.replace("y = 2\n", "\n        # deeper\n")
    buffer = Buffer()
    buffer.parse(old)
    assert buffer.parse(new).code == new


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # A comment indented after a block belongs to the block, and so do the lines
        # above it: the function before the change is parsed again.
        ("def f():\n    a\n\n# top\nx = 1\n", "def f():\n    a\n\n# top\n    # deep\nx = 1\n"),
        # An `else` continues the statement before it.
        ("if a:\n    b\nx = 1\ny = 2\n", "if a:\n    b\nelse:\n    x = 1\ny = 2\n"),
        # An indented line continues the block before it.
        ("def f():\n    a\nx = 1\ny = 2\n", "def f():\n    a\n    x = 1\ny = 2\n"),
        # A decorator belongs to the function after it.
        ("def f():\n    a\nx = 1\ndef g():\n    b\n", "def f():\n    a\n@d\ndef g():\n    b\n"),
        # Indented comments after the change, once owned by the next statement.
        (
            "def f():\n    a\nx = 1\n    # c\ny = 2\n",
            "def f():\n    a\nif x:\n    x = 1\n    # c\ny = 2\n",
        ),
        # The first indented block sets the indentation of the whole file.
        ("x = 1\ny = 2\nif a:\n    b\n", "x = 1\ny = 2\nif a:\n  b\n"),
    ],
)
def test_edits_where_a_statement_may_change_its_extent(old, new):
    buffer = Buffer()
    buffer.parse(old)
    assert buffer.parse(new).deep_equals(cst.parse_module(new))
    assert buffer.layout == layout(cst.parse_module(new), new)


def test_a_text_libcst_does_not_give_back_has_no_layout_and_is_parsed_whole():
    text = "def f():\n    pass\n\n\nfor x in y:\n    a()\n\\\n    b()\nz = 1\n"
    assert cst.parse_module(text).code != text  # (a lone backslash line: libcst's)
    buffer = Buffer()
    buffer.parse(text)
    assert buffer.layout is None  # positions come from the code libcst generates
    new = buffer.parse(text.replace("z = 1", "z = 2"))
    assert new.deep_equals(cst.parse_module(text.replace("z = 1", "z = 2")))


def test_a_syntax_error_is_the_whole_parses_and_the_next_edit_still_reuses():
    text = "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(10))
    buffer = Buffer()
    old = buffer.parse(text)
    broken = text.replace("return 5", "return (5")
    with pytest.raises(InvalidSyntax) as raised:
        buffer.parse(broken)
    with pytest.raises(InvalidSyntax) as expected:
        parse(broken)
    assert (raised.value.line, raised.value.column) == (expected.value.line, expected.value.column)
    new = buffer.parse(text.replace("return 5", "return (5)"))
    assert sum(a is b for a, b in zip(old.body, new.body, strict=True)) == 9


def test_positions_in_a_layout_are_those_of_the_whole_module():
    for text in _texts()[:12]:
        module = cst.parse_module(text)
        nodes = _nodes(module)
        some = random.Random(len(text)).sample(nodes, min(40, len(nodes)))
        whole = NodePositions(module, some)
        laid_out = NodePositions(module, some[:20], layout(module, text))
        for node in some:  # trivia and the module itself included (the whole path)
            assert laid_out[node] == whole[node]
            assert laid_out.extent(node) == whole.extent(node)
            assert laid_out.context(node) == whole.context(node)


def test_a_linter_with_a_buffer_finds_and_fixes_what_it_finds_without():
    linter = Linter(instantiate([f"TL{n}" for n in (101, 102, 201, 202, 203, 401, 402, 404)]))
    text = (ROOT / "examples" / "train_classifier.py").read_text(encoding="utf-8")
    rng = random.Random(3)
    buffer = Buffer()
    checked = reused = 0
    for _ in range(40):
        new = _edit(rng, text, [text])  # lines of the file itself, snippets
        try:
            expected = linter.lint(new, "t.py", with_edits=True)
        except LintError:
            continue
        before = buffer.module.body if buffer.module is not None else ()
        assert linter.lint(new, "t.py", with_edits=True, buffer=buffer) == expected
        assert buffer.module is not None
        reused += sum(any(s is t for t in before) for s in buffer.module.body)
        checked += bool(expected)
        text = new
    assert checked >= 15 and reused >= 50
