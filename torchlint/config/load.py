"""Configuration: `[tool.torchlint]` in pyproject.toml (or a torchlint.toml), merged with
command-line options or editor settings (`resolve`), validated, and turned into the plan
of a run: the rules to run, their settings, what may be fixed, what is shown.

Keys are spelled as ruff spells them. Unknown keys, unknown rule codes and values of
the wrong type are errors (exit 2), never silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import functools
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from torchlint.config.knowledge import KnowledgeError, read_knowledge, written
from torchlint.config.metadata import oldest_torch
from torchlint.lint.registry import RuleLoadError, all_rules, find, local_rules, options_of
from torchlint.options import Option, toml_value
from torchlint.settings import Knowledge, Settings

if TYPE_CHECKING:
    from torchlint.rule import Rule

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

CONFIG_FILES = (".torchlint.toml", "torchlint.toml", "pyproject.toml")

DEFAULT_EXCLUDE = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".torchlint_cache",
    ".tox",
    ".venv",
    "__pypackages__",
    "__pycache__",
    "_build",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)

_SELECTOR_KEYS = (
    "select",
    "ignore",
    "extend-select",
    "extend-ignore",
    "fixable",
    "unfixable",
    "extend-fixable",
)
_LIST_KEYS = (*_SELECTOR_KEYS, "exclude", "extend-exclude")
_BOOL_KEYS = ("unsafe-fixes", "force-exclude", "respect-gitignore", "preview")
IMPACTS = ("high", "low")  # `min-impact`: the least impact a finding shown has
_TARGET = re.compile(r"^(\d+)\.(\d+)$")


class ConfigError(Exception):
    """Invalid configuration or options; the message says what and where."""


@dataclass
class Config:
    """A config file's settings (the defaults without one); `resolve` merges a command
    line's or an editor's on top."""

    root: Path  # directory that relative patterns are resolved against
    source: Path | None = None  # the config file read, if any
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    # Added to per-file-ignores: a command line's --per-file-ignores replaces only those.
    extend_per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    force_exclude: bool = False
    respect_gitignore: bool = True
    unsafe_fixes: bool = False
    preview: bool = False  # run the preview rules too (found wrong in a shape, precision.md)
    min_impact: str = "high"  # "low": low-impact findings are shown (and fixed) too
    fixable: list[str] | None = None  # None: every rule
    extend_fixable: list[str] = field(default_factory=list)
    unfixable: list[str] = field(default_factory=list)
    target_torch: tuple[int, int] | None = None
    # Where target-torch comes from when not from the config file: the command line, or
    # the project's metadata.
    target_torch_source: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # `local-rules`: folders of rule modules, loaded (with the built-in and installed
    # rules in `rules`) unless the config is read untrusted (the editor's, by default):
    # then they are `skipped_local`, and selectors of codes not known pass unchecked.
    local_rules: tuple[Path, ...] = ()
    skipped_local: tuple[Path, ...] = ()
    rules: dict[str, type[Rule]] = field(default_factory=all_rules, repr=False, compare=False)
    knowledge: Knowledge = field(default_factory=Knowledge)  # [tool.torchlint.semantic]

    # -- rules -------------------------------------------------------------------------

    def selected_codes(self) -> list[str]:
        """The codes selected; preview rules only in preview mode, as ruff's."""
        rules = self.rules
        if self.select is None:
            chosen = {code for code, rule in rules.items() if rule.default_enabled}
        else:
            chosen = set(self.expand(self.select))
        chosen |= set(self.expand(self.extend_select))
        chosen -= set(self.expand(self.ignore))
        if not self.preview:
            chosen = {code for code in chosen if not rules[code].preview}
        return sorted(chosen)

    def preview_left_out(self) -> list[str]:
        """Preview rules named by their exact code in `select`/`extend-select` that do
        not run because preview mode is off (a prefix or `ALL` selects them quietly)."""
        if self.preview:
            return []
        rules = self.rules
        named = {s.strip().upper() for s in (*(self.select or ()), *self.extend_select)}
        ignored = set(self.expand(self.ignore))
        return sorted(c for c in named & set(rules) if rules[c].preview and c not in ignored)

    @property
    def low_impact(self) -> bool:
        """Low-impact findings are shown (`min-impact = "low"`, `--show-low-impact`)."""
        return self.min_impact == "low"

    def selecting(
        self,
        select: Sequence[str] | None,
        extend_select: Sequence[str] = (),
        ignore: Sequence[str] = (),
    ) -> Config:
        """This configuration under the rule selection of a command line (or an editor),
        layered as ruff layers them: a `select` there starts afresh, replacing both the
        file's `select` and its `extend-select`; `extend-select` and `ignore` add to it."""
        return dataclasses.replace(
            self,
            select=self.select if select is None else list(select),
            extend_select=[*(self.extend_select if select is None else ()), *extend_select],
            ignore=[*self.ignore, *ignore],
        )

    def unfixable_codes(self) -> frozenset[str]:
        """Codes whose fixes are never applied nor offered (`fixable`/`unfixable`, as ruff)."""
        fixable = set(self.expand(self.fixable if self.fixable is not None else ["ALL"]))
        fixable |= set(self.expand(self.extend_fixable))
        fixable -= set(self.expand(self.unfixable))
        return frozenset(self.rules) - fixable

    def rules_for(self, path: Path | None, codes: Sequence[str]) -> list[str]:
        """The selected codes minus the per-file ignores matching `path`."""
        ignores = [*self.per_file_ignores.items(), *self.extend_per_file_ignores.items()]
        if path is None or not ignores:
            return list(codes)
        ignored: set[str] = set()
        for pattern, selectors in ignores:
            if matches(path, pattern, self.root):
                ignored |= set(self.expand(selectors))
        return [c for c in codes if c not in ignored]

    def expand(self, selectors: Iterable[str]) -> list[str]:
        """The codes of this config's rules that `selectors` match (see `expand`)."""
        return expand(selectors, self.rules, unchecked=bool(self.skipped_local))

    def settings(self) -> Settings:
        return Settings(self.options, self.target_torch, self.knowledge)

    def read_project_torch(self, start: Path) -> None:
        """Without a `target-torch` setting, the oldest torch the project around `start`
        declares in its metadata (see metadata.py)."""
        if self.target_torch is not None:
            return
        declared = oldest_torch(start)
        if declared is not None:
            self.target_torch = declared.version
            self.target_torch_source = f"the project's metadata, {declared.source}"

    # -- files -------------------------------------------------------------------------

    def excluded(self, path: Path, walked: bool = False) -> bool:
        """`walked`: found below a directory being searched, whose own components were
        checked on the way down (or named by the user): a pattern without a slash then
        matches the entry's name only, so `torchlint check venv/lib/site-packages/pkg`
        still searches pkg."""
        names, slashed = _patterns((*self.exclude, *self.extend_exclude), walked)
        if walked:  # (discovery's hot loop: a regular expression on the name)
            if names is not None and names.match(path.name):
                return True
        elif names is not None or slashed:
            rel = relative(path, self.root)
            if names is not None and any(names.match(part) for part in rel.parts):
                return True
            return any(matches(path, p, self.root, rel) for p in slashed)
        return any(matches(path, p, self.root) for p in slashed)


@functools.lru_cache(maxsize=32)
def _patterns(
    patterns: tuple[str, ...], walked: bool
) -> tuple[re.Pattern[str] | None, tuple[str, ...]]:
    """Exclude patterns as one expression that matches a path component (those without a
    slash: when `walked`, as written; else once a trailing slash is stripped), and the
    others, as `matches` reads them."""
    names = [p.rstrip("/") for p in patterns if "/" not in (p if walked else p.rstrip("/"))]
    slashed = tuple(p for p in patterns if "/" in (p if walked else p.rstrip("/")))
    if not names:
        return None, slashed
    return re.compile("|".join(fnmatch.translate(name) for name in names)), slashed


def declared_options(rules: dict[str, type[Rule]] | None = None) -> dict[str, Option[Any]]:
    """Every rule's options (of `rules`, else the built-in and installed ones), by name
    (rules that share one share its declaration)."""
    return options_of(all_rules() if rules is None else rules)


def default_options(rules: dict[str, type[Rule]] | None = None) -> dict[str, Any]:
    return {name: option.default for name, option in declared_options(rules).items()}


_SELECTOR = re.compile(r"([A-Z]+)([0-9]*)")


def expand(
    selectors: Iterable[str], rules: Iterable[str] | None = None, unchecked: bool = False
) -> list[str]:
    """The codes of `rules` (else the built-in and installed ones) that selectors match:
    `ALL`, a code, or a prefix of one (`TL2`, `X1`: letters, then the first digits).
    ConfigError for a selector that matches nothing, unless `unchecked` (a config whose
    local rules were not loaded) and it is not a built-in's (TL)."""
    codes = list(all_rules() if rules is None else rules)
    out: list[str] = []
    for selector in selectors:
        s = selector.strip().upper()
        if s == "ALL":
            out.extend(codes)
            continue
        wanted = _SELECTOR.fullmatch(s)
        matched = [c for c in codes if wanted and _prefix(wanted, c)]
        if not matched and not (unchecked and wanted and wanted.group(1) != "TL"):
            raise ConfigError(f"unknown rule selector {selector!r} (see `torchlint rules`)")
        out.extend(matched)
    return out


def _prefix(wanted: re.Match[str], code: str) -> bool:
    """`code` is selected by the selector `wanted` (its letters exactly, then a prefix)."""
    letters, digits = wanted.groups()
    return code.startswith(letters + digits) and code[len(letters) : len(letters) + 1].isdigit()


def relative(path: Path, root: Path) -> PurePosixPath:
    try:  # no resolve(): a symlink is matched where it sits (and may be a loop)
        return PurePosixPath(Path(os.path.abspath(path)).relative_to(root).as_posix())
    except ValueError:
        return PurePosixPath(path.as_posix())


def matches(path: Path, pattern: str, root: Path, rel: PurePosixPath | None = None) -> bool:
    """Glob match against the path relative to `root` (`rel`, if already known), or any
    of its components when the pattern has no slash (as ruff does for `exclude` and
    `per-file-ignores`)."""
    if rel is None:
        rel = relative(path, root)
    pattern = pattern.rstrip("/")
    if "/" in pattern:
        pattern = pattern.removeprefix("./")
        return fnmatch.fnmatchcase(str(rel), pattern) or fnmatch.fnmatchcase(
            str(rel), pattern + "/*"
        )
    return any(fnmatch.fnmatchcase(part, pattern) for part in rel.parts)


def parse_target(value: str, where: str) -> tuple[int, int]:
    m = _TARGET.match(str(value).strip())
    if not m:
        raise ConfigError(f'{where}: target-torch must look like "2.4", got {toml_value(value)}')
    return int(m.group(1)), int(m.group(2))


def find_config(start: Path) -> Path | None:
    """The nearest config file at or above `start` (a pyproject.toml counts only with a
    [tool.torchlint] table)."""
    start = start.resolve()
    for directory in (start, *start.parents) if os.path.isdir(start) else start.parents:
        for name in CONFIG_FILES:
            candidate = directory / name
            if not os.path.isfile(candidate):  # unlike Path.is_file, never raises
                continue
            if name != "pyproject.toml":
                return candidate
            try:
                text = candidate.read_text(encoding="utf-8")
                if "torchlint" in tomllib.loads(text).get("tool", {}):
                    return candidate
            except (OSError, UnicodeDecodeError):
                continue
            except tomllib.TOMLDecodeError:
                if "[tool.torchlint" in text:
                    return candidate  # ours, and broken: load_config says where
                continue
    return None


def load_config(path: Path | None, trusted: bool = True) -> Config:
    """Read and validate a config file; `None` gives the defaults rooted at the cwd.
    Its local rules are loaded (Python run) only when `trusted`."""
    try:
        return _load(path, trusted)
    except RuleLoadError as exc:  # an installed plugin that cannot be loaded
        raise ConfigError(str(exc)) from None


def _load(path: Path | None, trusted: bool) -> Config:
    if path is None:
        return Config(root=Path.cwd(), options=default_options())
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("torchlint", {})
    else:
        table = data.get("tool", {}).get("torchlint", data)
    config = Config(root=path.parent.resolve(), source=path, options=default_options())
    try:
        _local_rules(config, table, str(path), trusted)
        apply_table(config, table, str(path))
    except ConfigError as exc:
        raise _located(exc, str(path)) from None
    return config


def _located(exc: ConfigError, where: str) -> ConfigError:
    """`exc`, its message starting with `where` (the file, the option)."""
    message = str(exc)
    return ConfigError(message if message.startswith(where) else f"{where}: {message}")


def override(config: Config, setting: str) -> None:
    """Lay a command line's `--config KEY = VALUE` (TOML, keys as the config file spells
    them, checked as its are) over `config`, as ruff does: `select` starts the selection
    afresh and `per-file-ignores` replaces the file's, as their command-line options do;
    a `semantic` key replaces that key's list only; the others as a second file would."""
    where = f"--config {setting!r}"
    try:
        table = tomllib.loads(setting)
    except tomllib.TOMLDecodeError as exc:
        if "=" not in setting:
            raise ConfigError(
                f"{where}: no such config file, nor a TOML `KEY = VALUE` pair"
            ) from None
        raise ConfigError(f"{where}: invalid TOML: {exc}") from None
    if not table:
        raise ConfigError(f"{where}: sets nothing (expected a TOML `KEY = VALUE` pair)")
    if "local-rules" in table:
        raise ConfigError(f"{where}: `local-rules` is read from a config file only")
    if "select" in table:
        config.extend_select = []
    if "per-file-ignores" in table:
        config.per_file_ignores = {}
    if isinstance(table.get("semantic"), dict):
        table["semantic"] = {**written(config.knowledge), **table["semantic"]}
    try:
        apply_table(config, table, where)
    except ConfigError as exc:
        raise _located(exc, where) from None
    if "target-torch" in table:
        config.target_torch_source = where


def _local_rules(config: Config, table: Any, where: str, trusted: bool) -> None:
    """`local-rules`: folders relative to the config file; their rules join the config's
    (and their options its defaults) when `trusted`, else they are only noted."""
    value = table.get("local-rules", []) if isinstance(table, dict) else []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: `local-rules` must be a list of folders")
    config.local_rules = tuple((config.root / folder).resolve() for folder in value)
    if not trusted:
        config.skipped_local = config.local_rules
        return
    config.rules = local_rules(config.local_rules)
    config.options = default_options(config.rules)


def apply_table(config: Config, table: dict[str, Any], where: str) -> None:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.torchlint] must be a table")
    options = declared_options(config.rules)
    for key, value in table.items():
        if key == "local-rules":
            continue  # read first: `_local_rules`
        if key in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where}: `{key}` must be a list of strings")
            if key in _SELECTOR_KEYS:
                config.expand(value)  # validates
            if key == "select":
                config.select = value
            elif key == "extend-select":
                config.extend_select.extend(value)
            elif key in ("ignore", "extend-ignore"):
                config.ignore.extend(value)
            elif key == "fixable":
                config.fixable = value
            elif key == "extend-fixable":
                config.extend_fixable.extend(value)
            elif key == "unfixable":
                config.unfixable.extend(value)
            elif key == "exclude":
                config.exclude = list(value)
            else:
                config.extend_exclude.extend(value)
        elif key in _BOOL_KEYS:
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: `{key}` must be true or false")
            setattr(config, key.replace("-", "_"), value)
        elif key in ("per-file-ignores", "extend-per-file-ignores"):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: `{key}` must be a table of glob = [codes]")
            for pattern, codes in value.items():
                if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
                    raise ConfigError(f"{where}: `{key}.{pattern}` must be a list of codes")
                config.expand(codes)
                getattr(config, key.replace("-", "_")).setdefault(pattern, []).extend(codes)
        elif key == "min-impact":
            if value not in IMPACTS:
                raise ConfigError(
                    f'{where}: `min-impact` must be "high" or "low", got {toml_value(value)}'
                )
            config.min_impact = value
        elif key == "target-torch":
            if not isinstance(value, str):
                hint = " (a TOML number drops digits: 2.10 reads as 2.1)" * (type(value) is float)
                raise ConfigError(
                    f'{where}: `target-torch` must be a string such as "2.4", '
                    f"got {toml_value(value)}{hint}"
                )
            config.target_torch = parse_target(value, where)
        elif key == "semantic":
            try:
                config.knowledge = read_knowledge(value, config.root)
            except KnowledgeError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        elif key in options:
            problem = options[key].problem(value)
            if problem is not None:
                raise ConfigError(f"{where}: `{key}` {problem}")
            config.options[key] = value
        elif config.skipped_local:
            continue  # perhaps an option of a local rule not loaded
        else:
            fixed_keys = [
                "per-file-ignores", "extend-per-file-ignores", "target-torch", "min-impact",
                "local-rules", "semantic",
            ]  # fmt: skip
            known = sorted([*_LIST_KEYS, *_BOOL_KEYS, *fixed_keys, *options])
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            raise ConfigError(f"{where}: unknown key `{key}`{hint}")


def instantiate(codes: Sequence[str], rules: dict[str, type[Rule]] | None = None) -> list[Rule]:
    """The rules of `codes`: of `rules` (a config's), else built-in, installed or local."""
    return [rules[c]() if rules is not None else find(c)() for c in codes]
