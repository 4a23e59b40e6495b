"""The one place that reaches into libcst's private code generation.

libcst generates code by calling `node._codegen(state, **kwargs)` on each node with a
`CodegenState` (`libcst._nodes.internal`), whose hooks see every node and token. Both are
private: their shape may change in any release. torchlint uses them to position only the
nodes it reports (`positions.py`) and to generate a fix's code in the context of the node
it replaces (`fixes/render.py`); nothing else in torchlint or its rules touches
`libcst._*` (tests/test_libcst_compat.py holds that, and this module's behaviour).

Tested range: libcst >=1.1,<1.10. Its ends, 1.1.0 and 1.9.0 (the newest release), pass
tests/test_libcst_compat.py, test_positions.py (libcst's own positions on real files),
test_fix_edits.py and test_gate.py. pyproject.toml declares the same range and a test
fails when the installed libcst lies outside it: to widen it, run those tests with the
new libcst, then change `TESTED`, this line and pyproject.toml together.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import sys
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import libcst as cst
from libcst._nodes.internal import CodegenState

TESTED = ">=1.1,<1.10"  # the libcst versions this module is tested with
_NULL = contextlib.nullcontext()


class Generation(CodegenState):
    """libcst's code generation, observed: `offset` counts the characters generated,
    `blocks` holds the indented blocks around the node being generated, `popped` the
    newline a module without a last one drops. For each node whose id is in `wanted`,
    `entered` and `left` are called around its code, and `syntactic` where libcst
    records its syntactic range (a range that starts or ends where a child's does)."""

    def __init__(self, module: cst.Module, wanted: set[int]) -> None:
        super().__init__(
            default_indent=module.default_indent, default_newline=module.default_newline
        )
        self.offset = 0
        self.wanted = wanted
        self.blocks: list[cst.IndentedBlock] = []
        self.popped = ""

    def generate(self, node: cst.CSTNode) -> None:
        """Generate `node`'s code (a module, a statement...) from the current offset."""
        node._codegen(self)

    @property
    def code(self) -> str:
        return "".join(self.tokens)

    @property
    def indent(self) -> tuple[str, ...]:
        """The indentation tokens in force."""
        return tuple(self.indent_tokens)

    def entered(self, node: cst.CSTNode, kwargs: dict[str, Any]) -> None:
        """A wanted node's code begins; `kwargs`: what its parent passed (default_comma...)."""

    def left(self, node: cst.CSTNode) -> None:
        """A wanted node's code ends."""

    def syntactic(
        self, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None
    ) -> AbstractContextManager[None]:
        """Around the code of `node`'s syntactic range, which starts where `start_node`'s
        does and ends where `end_node`'s does (where given)."""
        return _NULL

    # libcst's hooks

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        if self.tokens:
            self.popped = self.tokens.pop()

    def before_codegen(self, node: cst.CSTNode) -> None:
        if type(node) is cst.IndentedBlock:
            self.blocks.append(node)
        if id(node) in self.wanted:
            caller = sys._getframe(1).f_locals  # CSTNode._codegen(self, state, **kwargs)
            self.entered(node, dict(caller.get("kwargs", {})))

    def after_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            self.left(node)
        if type(node) is cst.IndentedBlock:
            self.blocks.pop()

    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> Any:  # libcst declares its own generator; any context manager does
        if id(node) not in self.wanted:
            return _NULL
        return self.syntactic(node, start_node, end_node)


def statement_offsets(module: cst.Module) -> tuple[str, list[int]]:
    """`module`'s code, generated as `Module._codegen_impl` does, and the offset where
    each top-level statement's code begins, then where the last one's ends."""
    state = CodegenState(
        default_indent=module.default_indent, default_newline=module.default_newline
    )
    for line in module.header:
        line._codegen(state)
    marks = []
    for stmt in module.body:
        marks.append(len(state.tokens))
        stmt._codegen(state)
    marks.append(len(state.tokens))
    offsets = list(itertools.accumulate(map(len, state.tokens), initial=0))
    for line in module.footer:
        line._codegen(state)
    if not module.has_trailing_newline:
        state.pop_trailing_newline()
    elif not state.tokens:
        state.add_token(state.default_newline)
    return "".join(state.tokens), [offsets[m] for m in marks]


@functools.cache
def codegen_kwargs(node_type: type[cst.CSTNode]) -> frozenset[str]:
    """The keyword arguments a parent may pass to the code generation of `node_type`."""
    return frozenset(inspect.signature(node_type._codegen_impl).parameters) - {"self", "state"}


def code_at(
    module: cst.Module,
    nodes: Iterable[cst.CSTNode],
    indent: Sequence[str],
    kwargs: dict[str, Any] | None = None,
) -> str:
    """The code of `nodes` generated where the indentation is `indent` and the parent
    passes `kwargs` (those each node takes: a replacement may be of another type)."""
    state = CodegenState(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        indent_tokens=list(indent),
    )
    for node in nodes:
        accepted = codegen_kwargs(type(node))
        node._codegen(state, **{k: v for k, v in (kwargs or {}).items() if k in accepted})
    return "".join(state.tokens)
