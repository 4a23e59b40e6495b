"""`torchlint.text.walk` visits what `CSTNode.visit` visits, in the same order, minus trivia."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from pathlib import Path

import libcst as cst
import pytest

from torchlint.text.walk import SCALAR_FIELDS, SOURCE_ORDER, TRIVIA_TYPES, child_fields, walk

NODE_CLASSES = sorted(
    (
        c
        for c in vars(cst).values()
        if isinstance(c, type)
        and issubclass(c, cst.CSTNode)
        and dataclasses.is_dataclass(c)
        and not inspect.isabstract(c)
    ),
    key=lambda c: c.__name__,
)
TRIVIA = {c for c in NODE_CLASSES if c.__name__ in TRIVIA_TYPES} | {
    cst.BaseParenthesizableWhitespace
}


def _libcst_order(cls: type) -> list[str]:
    source = inspect.getsource(cls._visit_and_replace_children)
    return list(dict.fromkeys(re.findall(r'visit_\w+\(\s*self,\s*"(\w+)"', source)))


def _node_types(hint) -> set[type]:
    if isinstance(hint, type):
        return {hint} if issubclass(hint, cst.CSTNode) else set()
    return {t for arg in typing.get_args(hint) for t in _node_types(arg)}


@pytest.mark.parametrize("cls", NODE_CLASSES, ids=lambda c: c.__name__)
def test_fields_match_libcst(cls):
    hints = typing.get_type_hints(cls)
    ours = child_fields(cls)
    visited = _libcst_order(cls)
    for name in visited:
        types = _node_types(hints[name])
        trivia_only = bool(types) and all(any(issubclass(t, x) for x in TRIVIA) for t in types)
        # every field we skip holds trivia only; every field we keep may hold a real node
        assert (name not in ours) == trivia_only, (cls.__name__, name, types)
    for name in ours:
        assert name in visited, (cls.__name__, name)
    assert not SCALAR_FIELDS & set(visited)
    assert list(ours) == [n for n in visited if n in ours], (cls.__name__, "order")
    if cls.__name__ in SOURCE_ORDER:
        assert [n for n in visited if n in ours] != [
            f.name for f in dataclasses.fields(cls) if f.name in ours
        ], f"{cls.__name__} needs no entry in SOURCE_ORDER"


def _recorder():
    """A visitor with a hook for every non-trivia node type, recording the calls."""
    log: list[tuple[str, int]] = []
    methods = {}
    for cls in NODE_CLASSES:
        if cls in TRIVIA:
            continue
        methods[f"visit_{cls.__name__}"] = lambda self, n: log.append(("v", id(n))) or None
        methods[f"leave_{cls.__name__}"] = lambda self, n: log.append(("l", id(n)))
    return type("Recorder", (cst.CSTVisitor,), methods)(), log


SAMPLES = [
    "import torch as T\nfrom torch.utils.data import DataLoader as DL, S\nfrom . import *\n",
    "@dec(1)\nasync def f(a, /, b: int = 2, *c, d, e=3, **k) -> T.Tensor:\n"
    "    async for x in y: pass\n    async with a as b, c: ...\n",
    "class C(B, metaclass=M):\n    x: int = 1\n    def g(self): return [i async for i in j if i]\n",
    "x = a if b else c\ntry:\n    pass\nexcept (E, F) as e:\n    raise X from e\n"
    "finally:\n    del a[1:2:3, ...]\n",
    "match p:\n    case [1, *r] | {'k': v, **kw} if v: pass\n    case C(a=1) as z: pass\n",
    "f'{a!r:>{w}}' 'b' r'c'\nlambda *a, **k: (yield)\nwhile (n := n - 1): print(*a, **k, sep='')\n",
    "type Alias[T] = list[T]\ndef h[T: int, *Ts, **P](x: T) -> T: ...\nglobal g; nonlocal n\n",
]


def _files() -> list[str]:
    libcst_dir = Path(cst.__file__).parent  # real code, always installed
    return [p.read_text(encoding="utf-8") for p in sorted(libcst_dir.rglob("*.py"))[:40]]


@pytest.mark.slow
@pytest.mark.parametrize("source", SAMPLES + _files())
def test_same_calls_in_same_order(source):
    module = cst.parse_module(source)
    visitor, expected = _recorder()
    module.visit(visitor)
    visitor2, got = _recorder()
    walk(module, visitor2)
    assert got == expected


def test_visit_returning_false_skips_children():
    class Outer(cst.CSTVisitor):
        def __init__(self):
            super().__init__()
            self.names: list[str] = []

        def visit_FunctionDef(self, node):
            return False

        def visit_Name(self, node):
            self.names.append(node.value)

    module = cst.parse_module("a = 1\ndef f():\n    b = 2\nc = 3\n")
    v = Outer()
    walk(module, v)
    assert v.names == ["a", "c"]


def test_visitor_wanting_trivia_gets_plain_visit():
    class Commas(cst.CSTVisitor):
        def __init__(self):
            super().__init__()
            self.n = 0

        def visit_Comma(self, node):
            self.n += 1

    v = Commas()
    walk(cst.parse_module("f(a, b, c)\n"), v)
    assert v.n == 2
