"""Parsing a file, within bounds: libcst's tree on a thread with a large stack, CPython's
syntax check first where the text may nest too deeply, and the size limits above which a
file is checked for syntax only, or not at all. Below the linter and an editor's buffer."""

from __future__ import annotations

import os
import queue
import re
import symtable
import threading
import warnings
from typing import TYPE_CHECKING, Any

from torchlint.results import ANALYSIS_ERROR, INVALID_SYNTAX, FileError

if TYPE_CHECKING:  # libcst is imported when a tree is first needed (a syntax check needs none)
    import libcst as cst


class LintError(Exception):
    """The file cannot be analysed (syntax error, too deeply nested...)."""

    def file_error(self, cell: int | None = None) -> FileError:
        """This error as the record reports show (in a notebook's `cell`)."""
        return FileError(ANALYSIS_ERROR, str(self), cell=cell)


class InvalidSyntax(LintError):
    """A syntax error, at one 1-based line and column."""

    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(f"syntax error at {line}:{column}: {message}")
        self.line, self.column, self.message = line, column, message

    def file_error(self, cell: int | None = None) -> FileError:
        return FileError(INVALID_SYNTAX, self.message, self.line, self.column, cell)

    @classmethod
    def from_compile(cls, exc: SyntaxError | ValueError, source: str) -> InvalidSyntax:
        """What `compile(source, ...)` raised (ValueError: null bytes, before Python 3.12)."""
        message = str(exc.msg) if isinstance(exc, SyntaxError) else str(exc)
        line = getattr(exc, "lineno", None)
        if line is not None:
            return cls(line, getattr(exc, "offset", None) or 1, message)
        before = source[: source.find("\0")] if "\0" in source else ""
        return cls(before.count("\n") + 1, len(before) - before.rfind("\n"), message)


# libcst's native parser recurses once per nesting level: a few thousand levels overflow
# an 8 MB stack (1 MB on Windows) and kill the process, and its time grows with the square
# of the depth. So libcst parses on a thread with a large stack (one long-lived thread: a
# new one per file costs 10% more CPU), and text that may nest deeper than it parses
# quickly is first given to CPython's parser, which refuses what CPython cannot compile
# (a tenth of the libcst parse, so only where needed: `_may_nest_deeply`).
DEEP_LEVELS = 4000  # libcst: 1.4 to 15 s for 4,000 levels, by the construct nested
# What each level of nesting takes one of at least: a bracket, an operator, a dot, a
# colon, a comma, a quote (strings concatenated), or a keyword of an expression that
# nests (`not`, `x if c else`, `and`/`or`, `await`, `lambda`, `for` of a comprehension).
_NESTING = re.compile(
    r"""[(\[{.+\-*/%@&|^~<>=!:,;'"]"""
    r"|\b(?:if|elif|else|not|and|or|in|is|for|await|lambda|yield|async)\b"
)
PARSE_STACK_BYTES = 512 * 1024 * 1024  # reserved address space; only what is used is paid
TOO_DEEP = "expression nested too deeply to analyse"


class _ParserThread:
    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.pid = 0

    def parse(self, source: str) -> cst.Module:
        import libcst

        if self.thread is None or self.pid != os.getpid():  # none yet, or left in the parent
            self._start()
        if self.thread is None:  # no thread with that stack here: the caller's stack
            return libcst.parse_module(source)
        box: dict[str, Any] = {}
        done = threading.Event()
        self.jobs.put((source, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        module: cst.Module = box["module"]
        return module

    def _start(self) -> None:
        self.jobs, self.pid, self.thread = queue.SimpleQueue(), os.getpid(), None
        for size in (PARSE_STACK_BYTES, PARSE_STACK_BYTES // 8):
            try:
                previous = threading.stack_size(size)
            except (ValueError, RuntimeError):  # a platform that refuses the size
                continue
            try:
                thread = threading.Thread(
                    target=self._serve, args=(self.jobs,), name="torchlint-parse", daemon=True
                )
                thread.start()
            except RuntimeError:  # address space limited (ulimit -v)
                continue
            finally:
                threading.stack_size(previous)
            self.thread = thread
            return

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[Any]) -> None:
        import libcst

        while (job := jobs.get()) is not None:
            source, box, done = job
            try:
                box["module"] = libcst.parse_module(source)
            except BaseException as exc:  # re-raised on the calling thread
                box["error"] = exc
            done.set()
            del job, source, box, done  # the tree is the caller's now: not kept alive here

    def stop(self) -> None:
        """End the thread (before a fork: a process that forks should have no threads)."""
        if self.thread is not None and self.pid == os.getpid():
            self.jobs.put(None)
            self.thread.join()
        self.thread = None


parser_thread = _ParserThread()


def _may_nest_deeply(source: str) -> bool:
    """Can this text hold DEEP_LEVELS levels of nesting? Each level takes a token of one
    statement that opens one (`_NESTING`), and statements hardly ever hold a blank line:
    the number of those tokens in a stretch without one bounds the depth (C-speed scans,
    of the stretches long enough only: a long function's body is rarely nested deep).
    Text big enough to exhaust even the large stack is always checked."""
    if len(source) < DEEP_LEVELS:
        return False
    if len(source) > PARSE_STACK_BYTES // 2048:
        return True
    text = source.replace("\r\n", "\n") if "\r" in source else source
    return any(
        len(stretch) >= DEEP_LEVELS and len(_NESTING.findall(stretch)) >= DEEP_LEVELS
        for stretch in text.split("\n\n")
    )


def parse(source: str, path: str = "<string>") -> cst.Module:
    """libcst's tree of `source`. A syntax error is reported where CPython reports it
    when CPython refuses the text too, else (CPython accepts it) where libcst does."""
    from libcst import ParserSyntaxError

    if _may_nest_deeply(source):
        _cpython_refusal(source, path)  # raises for text too deep to analyse
    try:
        return parser_thread.parse(source)
    except ParserSyntaxError as exc:
        raise _cpython_refusal(source, path) or _libcst_refusal(exc) from None
    except RecursionError:
        raise LintError(TOO_DEEP) from None


def check_syntax(source: str, path: str = "<string>") -> None:
    """Raise `InvalidSyntax` for text that does not parse, at C speed where it does (the
    check for files no rule needs to read); `TooLarge` for text too large to check. Text
    CPython refuses is given to libcst, which accepts syntax newer than this Python, when
    libcst's tree fits in memory (MAX_TOKENS); above that, CPython's error stands."""
    refuse_unchecked(source)
    check_compiles(source, path)


def check_compiles(source: str, path: str) -> None:
    refusal = _cpython_refusal(source, path)
    if refusal is None:
        return
    if len(source) > MAX_TOKENS and _tokens(source, MAX_TOKENS) > MAX_TOKENS:
        raise refusal
    parse(source, path)


def _cpython_refusal(source: str, path: str) -> InvalidSyntax | None:
    """CPython's syntax error in `source`, if any; LintError for text too deep for it.
    Read by CPython's parser into its symbol tables, not into Python objects (a third
    cheaper than an `ast` tree); what the tables refuse beyond the grammar (a `nonlocal`
    at module level) is a refusal too, which libcst then judges (`check_compiles`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings are the user's compiler's to print
        try:
            symtable.symtable(source, path, "exec")
        except (RecursionError, MemoryError):
            raise LintError(f"{TOO_DEEP} (Python itself refuses to compile it)") from None
        except (SyntaxError, ValueError) as exc:
            error = InvalidSyntax.from_compile(exc, source)
            if "too many" in error.message:  # nested parentheses, levels of indentation
                raise LintError(f"{TOO_DEEP} ({error.message})") from None
            return error
    return None


_LIBCST_POSITION = re.compile(r"parser error: error at (\d+):(\d+): ", re.DOTALL)


def _libcst_refusal(exc: cst.ParserSyntaxError) -> InvalidSyntax:
    """libcst's error, at the one position its message holds (its columns are 0-based)."""
    m = _LIBCST_POSITION.match(exc.message)
    if m is not None:
        return InvalidSyntax(int(m.group(1)), int(m.group(2)) + 1, exc.message[m.end() :])
    message = exc.message.removeprefix("tokenizer error: ")
    return InvalidSyntax(exc.raw_line, exc.raw_column + 1, message)


# libcst's tree takes 2 to 4 KB per token of the text (measured on PyTorch's sources;
# 3.6 KB at worst, in tables of numbers), so a process's peak memory is bounded by its
# largest analysed file: about 45 MB + MAX_TOKENS x 3.6 KB x 1.25 (model, positions).
# A file above that is checked for syntax only (by CPython alone: libcst would need the
# memory) and reported with a warning. CPython's own parser needs about 0.5 KB and 2 us
# a token (measured on dense tables of numbers: 1.9 GB and 10 s for 4 million), so a
# file above MAX_SYNTAX_TOKENS is not even checked for syntax (50 MB of generated data
# would take 8 GB and a minute), with a warning. A token takes a character at least, so
# shorter text is never counted, and counting stops at the limit it is counted for.
MAX_TOKENS = 75_000
MAX_SYNTAX_TOKENS = 1_000_000
_TOKEN = re.compile(
    r"""(?s)[rRbBuUfF]{0,2}(?:'''(?:\\.|[^\\])*?'''|"{3}(?:\\.|[^\\])*?"{3}"""
    r"""|'(?:\\.|[^'\\\r\n])*'|"(?:\\.|[^"\\\r\n])*")|#[^\r\n]*|\w+|[^\w\s]"""
)


class TooLarge(LintError):
    """A file too large to analyse in bounded memory: checked for syntax only, or (above
    MAX_SYNTAX_TOKENS) not at all."""


def _tokens(source: str, limit: int) -> int:
    """The tokens of `source` (a string or a comment counts one), counted up to `limit` + 1."""
    return _TOKEN.subn("", source, count=limit + 1)[1]


def refuse_unchecked(source: str) -> None:
    """Raise `TooLarge` for text too large for even CPython's parser (MAX_SYNTAX_TOKENS)."""
    if len(source) > MAX_SYNTAX_TOKENS and _tokens(source, MAX_SYNTAX_TOKENS) > MAX_SYNTAX_TOKENS:
        raise TooLarge(
            f"too large to check (over {MAX_SYNTAX_TOKENS:,} tokens, {len(source) / 1e6:.1f} "
            "million characters); not analysed, nor checked for syntax"
        )


def check_size(source: str, path: str) -> None:
    """Raise `TooLarge` (after CPython's syntax check) for text above MAX_TOKENS."""
    if len(source) <= MAX_TOKENS:
        return
    tokens = _tokens(source, MAX_TOKENS)
    if tokens > MAX_TOKENS:
        refusal = _cpython_refusal(source, path)
        if refusal is not None:
            raise refusal
        raise TooLarge(
            f"too large to analyse (over {MAX_TOKENS:,} tokens); checked for syntax only"
        )
