"""Find the files to lint and lint (or fix) each one.

Discovery honours `.gitignore` (and `.git/info/exclude`), the configured `exclude`
patterns and the default excludes; a file named explicitly on the command line is
linted even when excluded, unless `--force-exclude`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from torchlint.config.load import Config, instantiate
from torchlint.lint.noqa import add_noqa
from torchlint.project.layout import alone
from torchlint.results import (
    ANALYSIS_ERROR,
    IO_ERROR,
    RULE_ERROR,
    UNUSED_NOQA,
    FileError,
    FileResult,
    Job,
    Violation,
)
from torchlint.text.source import (
    SourceError,
    SourceFile,
    irregular,
    read_source,
    write_source,
)

if TYPE_CHECKING:  # the linter (libcst, the semantic model) is imported when a file is linted
    import pathspec

    from torchlint.lint.incremental import Buffer
    from torchlint.lint.linter import Linter, RuleErrorHandler
    from torchlint.rule import Rule
    from torchlint.semantic.external import Environment

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")


@dataclass(frozen=True)
class Given:
    """What a caller gives one text's lint besides its Job (`lint_text`, `lint_notebook`):
    a rule that raises is reported to `on_rule_error`, if given, and the others' findings
    kept; an editor's `buffer` parses a lint's text again only where it changed; `env` is
    what the rest of the file's project tells it (its summary, unless not wanted:
    `summary`, and the answers go in the result); `rules`, the rule classes by code (a
    config's; else the registry's)."""

    on_rule_error: RuleErrorHandler | None = None
    buffer: Buffer | None = None
    env: Environment | None = None
    rules: dict[str, type[Rule]] | None = None
    summary: bool = True


NOTHING = Given()


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    errors: list[FileResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The folder each file was found from (a folder given, or a file's own): the root of
    # its project where no marker (pyproject.toml, .git...) says otherwise.
    bases: dict[Path, Path] = field(default_factory=dict)
    walked: list[Path] = field(default_factory=list)  # the folders walked for them


def file_error(exc: Exception, code: str = ANALYSIS_ERROR) -> FileError:
    """What stopped a file from being checked, as its record: the linter's (a syntax
    error where it is), a read or write error (`SourceError`), else `code`."""
    from torchlint.lint.parser import LintError

    if isinstance(exc, LintError):
        return exc.file_error()
    return FileError(IO_ERROR if isinstance(exc, SourceError) else code, str(exc))


def failed(name: str, exc: Exception, code: str = ANALYSIS_ERROR) -> FileResult:
    """The result of a file that could not be checked at all."""
    return FileResult(name, errors=[file_error(exc, code)])


def display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


class _GitIgnore:
    """`.gitignore` files from the repository root down, evaluated per directory."""

    def __init__(self) -> None:
        self._specs: dict[Path, pathspec.GitIgnoreSpec | None] = {}

    def _spec(self, directory: Path) -> pathspec.GitIgnoreSpec | None:
        if directory not in self._specs:
            lines: list[str] = []
            for name in (".gitignore", ".git/info/exclude"):
                with contextlib.suppress(OSError):
                    lines += (
                        (directory / name)
                        .read_text(encoding="utf-8", errors="replace")
                        .splitlines()
                    )
            spec = None
            if lines:
                import pathspec

                spec = pathspec.GitIgnoreSpec.from_lines(lines)
            self._specs[directory] = spec
        return self._specs[directory]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        for directory in path.parents:
            spec = self._spec(directory)
            if spec is not None:
                rel = path.relative_to(directory).as_posix() + ("/" if is_dir else "")
                if spec.match_file(rel):
                    return True
            if os.path.lexists(directory / ".git"):
                break
        return False


def discover(paths: Sequence[str], config: Config, force_exclude: bool = False) -> Discovery:
    found = Discovery()
    gitignore = _GitIgnore() if config.respect_gitignore else None
    seen: set[Path] = set()

    def add(path: Path, base: Path) -> None:
        key = path.absolute()
        if key in seen:
            return
        seen.add(key)
        found.bases[path] = base
        try:
            kind = irregular(os.stat(path).st_mode)
        except OSError:  # a dangling link, say: reading it says why
            kind = None
        if kind is None:
            found.files.append(path)
        else:  # reading a FIFO would wait for a writer; a device may never end
            found.warnings.append(f"{display(path)}: {kind}, not a regular file; skipped")

    for raw in paths:
        path = Path(raw)
        try:
            path.resolve(strict=True)
        except FileNotFoundError:
            found.errors.append(
                FileResult(raw, errors=[FileError(IO_ERROR, "no such file or directory")])
            )
            continue
        except (RuntimeError, OSError) as exc:
            reason = "symlink loop" if "loop" in str(exc).lower() else str(exc)
            found.errors.append(FileResult(raw, errors=[FileError(IO_ERROR, reason)]))
            continue
        if path.is_dir():
            found.walked.append(path)
            before = len(found.files)
            for file in _walk(path, config, gitignore, found.warnings):
                add(file, path)
            if len(found.files) == before:
                found.warnings.append(f"{raw}: no Python files found")
        elif not (force_exclude and config.excluded(path)):
            add(path, _base_of(path))
    return found


def _base_of(file: Path) -> Path:
    """Where a file named on the command line is found from: the working folder where the
    file lies below it (`torchlint check segment/train.py` at a repository's top, whose
    `utils/` it imports), else its own folder; a project marker above the file decides
    before either (`layout.find_root`)."""
    here = Path.cwd()
    inside = not file.is_absolute() and ".." not in file.parts
    return here if inside and not alone(here) else file.parent


def _walk(
    root: Path, config: Config, gitignore: _GitIgnore | None, warnings: list[str]
) -> Iterator[Path]:
    """The Python files below `root`. Links to directories are not followed (as git and
    ruff do not): one named like a Python file gets a warning, not silence."""
    for directory, dirnames, filenames in os.walk(root):
        base = Path(directory)
        keep = []
        for name in sorted(dirnames):
            sub = base / name
            if config.excluded(sub, walked=True) or (
                gitignore and gitignore.ignored(sub.absolute(), True)
            ):
                continue
            if name.endswith(PYTHON_SUFFIXES) and os.path.islink(sub):
                warnings.append(
                    f"{display(sub)}: a link to a directory, not followed; name it to check it"
                )
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            if not name.endswith(PYTHON_SUFFIXES):
                continue
            file = base / name
            if config.excluded(file, walked=True) or (
                gitignore and gitignore.ignored(file.absolute(), False)
            ):
                continue
            yield file


def rules_of(codes: Sequence[str]) -> list[Rule]:
    return instantiate(codes)


def _linter(job: Job, codes: Sequence[str], given: Given) -> Linter:
    from torchlint.lint.linter import Linter

    return Linter(
        instantiate(codes, given.rules),
        job.settings,
        job.unfixable,
        given.on_rule_error,
        summary=given.summary,
        low_impact=job.low_impact,
    )


def _syntax_only(text: str, job: Job, codes: Sequence[str], env: Environment | None) -> bool:
    """No rule of `codes` may have anything to say about `text` (their tokens) and its
    project tells it nothing: there is only its syntax to check, which needs neither the
    rules nor libcst (the linter would do the same, once both were imported)."""
    from torchlint.lint.tokens import any_applies

    if env is not None and env.wanted:
        return False
    rules = token_rules(codes)
    return rules is not None and not any_applies(rules, text, job.settings.knowledge)


def token_rules(codes: Sequence[str]) -> list[type[Rule]] | None:
    """The rules of `codes` as their tokens need them (`registry.unloaded`: not imported);
    None where a code is not registered (a caller's own rule: nothing is screened out)."""
    from torchlint.lint.registry import unloaded

    try:
        return unloaded(codes)
    except KeyError:
        return None


def lint_text(
    text: str,
    name: str,
    job: Job,
    codes: Sequence[str],
    given: Given = NOTHING,
) -> tuple[FileResult, str]:
    """Lint or fix Python source text in memory, with what the caller `given`: the
    result, and the (fixed) text to write (as `lint_notebook`'s, for a notebook)."""
    from torchlint.lint.parser import LintError, TooLarge, check_syntax

    result = FileResult(name, text=text)
    env = given.env
    linter = None if _syntax_only(text, job, codes, env) else _linter(job, codes, given)
    learned = None  # what the linter tells of the file's place in its project
    try:
        if linter is None:
            check_syntax(text, name)
        elif job.fix or job.diff:
            from torchlint.lint.linter import unified_diff

            outcome = linter.fix(text, name, unsafe=job.unsafe, env=env)
            learned = outcome.summary, outcome.checked
            result.fixed, result.later = outcome.fixed, outcome.later
            result.text = outcome.text
            result.violations = outcome.remaining
            if job.with_edits:  # the fixes' edits, but not for those the fixer refused
                refused = {(v.code, v.line, v.column): v for v in outcome.remaining if not v.fix}
                result.violations = [
                    refused.get((v.code, v.line, v.column), v)
                    for v in linter.lint(outcome.text, name, with_edits=True, env=env)
                ]
            if job.diff and outcome.text != text:
                result.diff = unified_diff(name, text, outcome.text)
        else:
            analysis = linter.analyse(text, name, job.with_edits, given.buffer, env)
            result.violations = analysis.violations
            learned = analysis.summary, analysis.checked
    except TooLarge as exc:
        result.warning = str(exc)
    except LintError as exc:
        result.errors = [file_error(exc)]
    if linter is not None:
        result.errors += [FileError(RULE_ERROR, said) for said in linter.failures.values()]
    if env is not None and env.path is not None:
        summary, result.checked = learned or (None, False)
        result.summary = summary.to_json() if summary is not None else None
        result.answers = env.answers
    return result, result.text or ""


def lint_notebook(
    text: str,
    name: str,
    job: Job,
    codes: Sequence[str],
    given: Given = NOTHING,
) -> tuple[FileResult, str]:
    """Lint or fix a Jupyter notebook's JSON text (`lint_text`, for the program the
    cells make): the result, and the (fixed) JSON text."""
    from torchlint.lint.notebook import Notebook, NotebookError

    try:
        notebook = Notebook.parse(text)
    except NotebookError as exc:
        return failed(name, exc, IO_ERROR), text
    for statements in (False, True):  # statement separators survive more fixes (see notebook.py)
        program = notebook.program(statements)
        # A cell that does not parse is an error, and the notebook is not fixed (a fix
        # could need that cell, or conflict with it), but the other cells are analysed.
        run = replace(job, fix=False, diff=False) if program.broken else job
        result, _ = lint_text(program.source, name, run, codes, given)
        if result.errors:
            result.errors, result.text = [program.explain(e) for e in result.errors], None
            return result, text
        try:
            fixed = result.text or ""
            chunks = program.split(fixed)
            break
        except NotebookError as exc:
            error = failed(name, exc)
    else:
        return error, text
    changed = {c.cell: c.source for c in chunks if c.source != program.originals[c.cell]}
    try:
        new_text = notebook.with_sources(changed)
    except NotebookError as exc:
        return failed(name, exc), text
    result.violations = program.violations(result.violations, fixed, chunks)
    result.diff = notebook.diff(name, changed) if job.diff and changed else None
    result.text, result.cells = None, notebook.sources(changed)
    result.errors = list(program.broken.values())
    return result, new_text


def process_file(
    path: Path, job: Job, codes: Sequence[str], env: Environment | None = None
) -> FileResult:
    """Lint or fix one file (rewritten in place when fixed); `env` as for `Given`."""
    name = display(path)
    try:
        source: SourceFile = read_source(path)
    except SourceError as exc:
        return failed(name, exc)
    lint = lint_notebook if name.endswith(".ipynb") else lint_text
    result, new_text = lint(source.text, name, job, codes, Given(env=env))
    if job.fix and not job.diff and not result.errors and new_text != source.text:
        try:
            write_source(source, new_text)
        except SourceError as exc:  # nothing written: report what the file on disk holds
            result, _ = lint(source.text, name, replace(job, fix=False), codes, Given(env=env))
            result.errors = [file_error(exc)]
    return result


def program_text(name: str, text: str) -> str:
    """The Python program a file's text stands for: a notebook's code cells as one
    program (empty where its JSON cannot be read), any other file's text as it is."""
    if not name.endswith(".ipynb"):
        return text
    from torchlint.lint.notebook import Notebook, NotebookError

    try:
        return Notebook.parse(text).program().source
    except NotebookError:
        return ""


def summarize_file(path: Path, job: Job, env: Environment) -> FileResult:
    """The summary of a file of the project that no rule reads (another file imports it),
    with the answers it was computed from; an error where it cannot be analysed."""
    from torchlint.lint.linter import Linter
    from torchlint.lint.parser import LintError

    name = display(path)
    result = FileResult(name)
    try:
        text = program_text(name, read_source(path).text)
        result.summary = Linter([], job.settings).summarize(text, name, env).to_json()
    except (SourceError, LintError) as exc:
        result.errors = [file_error(exc)]
    result.answers = env.answers
    return result


def add_noqa_text(text: str, name: str, violations: Sequence[Violation]) -> tuple[str, int]:
    """`text` (a `.py` file's, or a notebook's JSON) with a `# noqa: CODE` comment on each
    line of `violations` (the file's findings, as its project's run found them), and how
    many lines got a comment. A TL904 finding gets none (as ruff adds no RUF100): a
    stale code is for `fix` to remove, not to keep."""
    from torchlint.lint.notebook import Notebook

    violations = [v for v in violations if v.code != UNUSED_NOQA]
    wanted: dict[int, set[str]] = {}
    if not name.endswith(".ipynb"):
        for v in violations:
            wanted.setdefault(v.line, set()).add(v.code)
        return add_noqa(text, wanted)
    # A notebook: comments go into the program its findings come from (IPython syntax
    # stands replaced there), which is cut back into cells.
    notebook = Notebook.parse(text)
    program = notebook.program()
    start = {chunk.cell: chunk.start for chunk in program.split(program.source)}
    for v in violations:
        wanted.setdefault(start[v.cell or 0] + v.line - 1, set()).add(v.code)
    new_program, added = add_noqa(program.source, wanted)
    chunks = program.split(new_program)
    changed = {c.cell: c.source for c in chunks if c.source != program.originals[c.cell]}
    return notebook.with_sources(changed), added


def add_noqa_file(path: Path, result: FileResult) -> int:
    """`add_noqa_text` on a file with its findings (`result`, from a run over its
    project), written back in place: the lines changed; a file that could not be read
    or written gets the error in `result`. A file with an error (a syntax error, a cell
    that does not parse) is left as it is."""
    from torchlint.lint.notebook import NotebookError

    if result.errors or not result.violations:
        return 0
    try:
        source: SourceFile = read_source(path)
        new_text, added = add_noqa_text(source.text, result.path, result.violations)
        if added:
            write_source(source, new_text)
    except (SourceError, NotebookError) as exc:
        result.errors = [file_error(exc)]
        return 0
    return added
