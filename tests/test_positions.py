"""`torchlint.text.positions` gives libcst's PositionProvider ranges, for any node asked."""

from __future__ import annotations

import random
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.text.positions import NodePositions, layout
from torchlint.text.walk import descendants

SAMPLES = [
    "x = 1\r\ny = f(a,\r\n      b)\r\n",
    "if a:\n    pass\nelif b:\n    x = [\n        1,\n    ]\nelse:\n    y = 2  # c\n",
    "@d\nclass C(B):\n\tdef f(self):\n\t\treturn (1 +\n\t\t\t2)\n\n\n",
    "try:\n    a()\nexcept E:\n    b()\nelse:\n    c()\nfinally:\n    d()\n",
    "with a as b, c:\n    for i in x: g(i)\n    else: h()\nwhile 1: break\n",
    's = \'é€𝄞\' + f\'{x!r:>{w}}\'; t = """a\nb"""\nmatch p:\n    case [1, *r]: pass\n',
    "\n\n# only comments\n",
    "def f(a, /, b=1, *c, d, **e) -> int: ...\nlambda: (yield)\n",
]


def _files() -> list[str]:
    here = Path(cst.__file__).parent
    return [p.read_text(encoding="utf-8") for p in sorted(here.rglob("*.py"))[:12]]


def _nodes(module: cst.Module) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            found.append(node)
            return True

    module.visit(Collect())
    return found


@pytest.mark.slow
@pytest.mark.parametrize("source", SAMPLES + _files())
def test_every_node_as_libcst_positions_it(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _nodes(module)
    ours = NodePositions(module, nodes)
    for node in nodes:
        assert ours[node] == expected[node], (type(node).__name__, module.code_for_node(node))


@pytest.mark.parametrize("source", SAMPLES + _files()[:5])
def test_a_few_nodes_and_nodes_asked_later(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = _nodes(module)
    rng = random.Random(len(source))
    some = rng.sample(nodes, min(5, len(nodes)))
    ours = NodePositions(module, some[:2])
    for node in some:  # the last three were not announced: computed on demand
        assert ours[node] == expected[node]


@pytest.mark.parametrize("source", SAMPLES + _files()[:5])
def test_nodes_wanted_together_with_the_statement_holding_them(source):
    """`want`: nodes positioned in one pass, at libcst's positions; with a layout and the
    index of the top-level statement holding them, without generating the module."""
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    laid = layout(module, source)
    if not module.body or laid is None:
        return
    index = len(module.body) // 2
    inside = list(descendants(module.body[index]))
    ours = NodePositions(module, (), laid)
    ours.want(inside, index)
    assert ours.layout is laid  # (not the whole module generated again)
    nodes = _nodes(module)
    ours.want(random.Random(len(source)).sample(nodes, min(5, len(nodes))))
    for node in [*inside, *nodes[:40]]:
        assert ours[node] == expected[node], (type(node).__name__, module.code_for_node(node))
