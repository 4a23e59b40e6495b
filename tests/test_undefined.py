"""torchlint.lint.undefined: names read where nothing binds them yet, in the order a program
runs, and mixed-indentation lines (what the fix engine checks a fixed program for)."""

from __future__ import annotations

import pytest

from torchlint.lint.undefined import mixed_indentation, undefined_names

from .test_layers import graph  # noqa: F401 - the import graph fixture


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import torch\nx = torch.zeros(1)\n", []),
        ("x = torch.zeros(1)\nimport torch\n", [("torch", 1)]),
        # Function bodies run when called: every module-level binding exists by then.
        ("def f():\n    return torch.ones(1)\nimport torch\n", []),
        # Names bound in any branch of a try/if count after it, never before it.
        ("try:\n    import torch\nexcept ImportError:\n    torch = None\ntorch.cuda\n", []),
        (
            "torch.manual_seed(0)\ntry:\n    import torch\nexcept ImportError:\n    pass\n",
            [("torch", 1)],
        ),
        ("if ok:\n    import apex\napex.amp\n", [("ok", 1)]),
        # A class body sees its own names, its comprehensions and methods do not.
        ("class A:\n    x = 1\n    y = [x for _ in range(3)]\n", [("x", 3)]),
        ("class A:\n    x = 1\n    def f(self):\n        return x\n", [("x", 4)]),
        ("class A:\n    x = 1\n    y = x + 1\n", []),
        ("from os import *\nprint(path)\n", []),
        ("[y for y in range(3)]\nprint(y)\n", [("y", 2)]),
        ("if (n := 3):\n    pass\nprint(n)\n", []),
        ("def f():\n    global G\n    G = 1\nprint(G)\n", []),
        ("x += 1\n", [("x", 1)]),
        # Defaults are evaluated where the lambda is made, its body when it is called.
        ("f = lambda a, b=c: a + b + d\nc = 1\n", [("c", 1), ("d", 1)]),
        ("def f(a=b):\n    return a\nb = 1\n", [("b", 1)]),
        ("for i in range(2):\n    print(i)\nprint(i)\n", []),
        ("with open('f') as fh:\n    pass\nfh.read()\n", []),
        ("try:\n    pass\nexcept OSError as e:\n    print(e)\n", []),
        ("match p:\n    case {'k': v, **rest}:\n        print(v, rest)\n", [("p", 1)]),
        ("class B(Base):\n    pass\n", [("Base", 1)]),
        ("def outer():\n    x = 1\n    def inner():\n        return x + y\n", [("y", 4)]),
        ("print(__file__, __name__, len)\n", []),
    ],
)
def test_names_read_before_they_are_bound(source, expected):
    assert undefined_names(source) == expected


def test_only_the_statements_mentioning_the_names_asked_about_are_walked():
    source = "x = torch.zeros(1)\nimport torch\ny = undefined_a\ndef f():\n    return undefined_b\n"
    assert undefined_names(source, {"torch"}) == [("torch", 1)]
    assert undefined_names(source, {"undefined_b", "nothing"}) == [("undefined_b", 5)]
    # A star import binds every name, mentioned or not.
    assert undefined_names("from os import *\nprint(path)\n", {"path"}) == []
    assert undefined_names("x = 1\r\ny = z\rz = 1\n", {"z"}) == [("z", 2)]


def test_text_this_python_cannot_parse_is_not_judged():
    assert undefined_names("def f(:\n") is None
    assert undefined_names("x = (\n") is None


def test_deep_expressions_do_not_overflow_the_stack():
    """As deep as CPython builds a tree: the walk itself never recurses per level."""
    source = "x = " + " + ".join(["y"] * 1000) + "\n"
    assert undefined_names(source) == [("y", 1)] * 1000
    assert undefined_names("x = " + " + ".join(["y"] * 20000) + "\n") is None


def test_mixed_indentation():
    assert mixed_indentation("def f():\n\tx = g(\n\t    a,\n\t)\n") == 1
    assert mixed_indentation("def f():\n\tx = g(\n\t\ta,\n\t)\n    y\n") == 0


def test_undefined_is_a_leaf(graph):  # noqa: F811 - the fixture
    assert graph["torchlint.lint.undefined"] == set()
