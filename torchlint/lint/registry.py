"""Finds the rules: the built-in ones (the `torchlint.rules` package, the repository's
`rules/`), those of installed plugins (entry points of the group `torchlint.rules`), and
a config's local rules (`local-rules`: folders of rule modules)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Sequence
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from torchlint import options as opts
from torchlint.lint.catalog import CATALOG, RULE_API_FINGERPRINT, Entry
from torchlint.options import Option

if TYPE_CHECKING:
    from torchlint.rule import Rule

FAMILIES = {
    "TL0": "batch size",
    "TL1": "device placement",
    "TL2": "data loading",
    "TL3": "multi-GPU",
    "TL4": "syncs and memory",
    "TL5": "precision",
    "TL6": "backends and kernels",
    "TL7": "frameworks",
    "TL9": "meta",
}


def family(code: str) -> str:
    return FAMILIES.get(code[:3], "other")


class OptionCollision(RuntimeError):
    """Two rules declare one option name differently."""


class RulesMissing(RuntimeError):
    """Neither `torchlint.rules` nor a source checkout's `rules/` can be imported."""


def rules_package() -> ModuleType:
    """`torchlint.rules`: the installed package, or a source checkout's `rules/` beside
    the `torchlint/` imported (setuptools ships the folder under that name, so a checkout
    imported without an editable install, as `python -m torchlint` at its root is with a
    regular one, has no `torchlint.rules` of its own)."""
    try:
        return importlib.import_module("torchlint.rules")
    except ModuleNotFoundError as exc:
        if exc.name != "torchlint.rules":
            raise
    package = Path(__file__).resolve().parents[1]  # torchlint/, above lint/
    folder = package.parent / "rules"
    spec = importlib.util.spec_from_file_location(
        "torchlint.rules", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None or not (folder / "__init__.py").is_file():
        raise RulesMissing(
            f"torchlint's rules are missing: {package} has no `rules` package and no "
            f"{folder} beside it; reinstall torchlint (`pip install -e .` in a checkout)"
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules["torchlint.rules"] = module
    spec.loader.exec_module(module)
    sys.modules["torchlint"].rules = module  # type: ignore[attr-defined]  # as an import binds it
    return module


ENTRY_POINTS = "torchlint.rules"  # the group a plugin's entry point is in
# A rule's code: letters, then digits; `TL` is the built-in rules' prefix only.
CODE = re.compile(r"[A-Z]+[0-9]+")


class RuleLoadError(RuntimeError):
    """A local rule module or a plugin that cannot be loaded; the message names its file."""


def rule_modules(package: ModuleType) -> dict[str, Path]:
    """The modules of the built-in rules' package (`rules/`: a module per rule), by name,
    with the files they are read from, sorted by name."""
    return {
        path.stem: path
        for folder in package.__path__
        for path in sorted(Path(folder).glob("*.py"))
        if path.stem != "__init__"
    }


def fingerprint(path: Path) -> str | None:
    """What the catalog records of a file it was generated from: a hash of its bytes
    (None for a file that cannot be read)."""
    try:
        return hashlib.sha1(path.read_bytes(), usedforsecurity=False).hexdigest()[:16]
    except OSError:
        return None


# The rule API's module: the base class's defaults and `TRAINS`, which a rule's catalog
# entry may hold too.
RULE_API = Path(__file__).resolve().parents[1] / "rule.py"


@cache
def builtin_rules() -> dict[str, type[Rule]]:
    """The built-in rules: code -> rule class, sorted by code."""
    package = rules_package()
    found: dict[str, type[Rule]] = {}
    for name in rule_modules(package):
        module = importlib.import_module(f"{package.__name__}.{name}")
        for rule in _defined(module):
            if rule.code in found:
                raise RuntimeError(f"two rules claim {rule.code}")
            found[rule.code] = rule
    options_of(found)  # raises on a collision
    return dict(sorted(found.items()))


class _Deferred(type):
    """The class of a built-in rule not imported yet: it has what the catalog says; what
    else is read of it (its documentation, its fix safety), or an instance made of it,
    is the rule's, imported then."""

    module: str

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return loaded(cast("type[Rule]", cls))(*args, **kwargs)

    def __getattr__(cls, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return getattr(loaded(cast("type[Rule]", cls)), attribute)


def _deferred(entry: Entry) -> type[Rule]:
    """A built-in rule's stand-in, from its catalog entry (torchlint/lint/catalog.py: what a
    run reads of a rule before it needs the rule itself)."""
    code, name, default, preview, options, tokens, pattern, _ = entry
    namespace = {
        "code": code,
        "name": name,
        "default_enabled": default,
        "preview": preview,
        "options": tuple(getattr(opts, option) for option in options),
        "tokens": tokens,
        "pattern": None if pattern is None else re.compile(*pattern),
        "origin": "built-in",
        "module": f"{code.lower()}_{name.replace('-', '_')}",
    }
    return cast("type[Rule]", _Deferred(f"Deferred{code}", (), namespace))


def loaded(rule: type[Rule]) -> type[Rule]:
    """The rule class itself: a built-in rule not imported yet is imported now."""
    if not isinstance(rule, _Deferred):
        return rule
    return _builtin(cast(_Deferred, rule).module, rule.code)


@cache
def _builtin(module_name: str, code: str) -> type[Rule]:
    package = rules_package()
    module = importlib.import_module(f"{package.__name__}.{module_name}")
    for rule in _defined(module):
        if rule.code == code:
            return rule
    raise RuntimeError(f"{module.__name__} defines no rule {code}")


def _shipped() -> dict[str, type[Rule]]:
    """The built-in rules: the catalog's stand-ins for the modules of rules/ whose text is
    the one it was generated from, and the rules of every other module, imported now (a
    rule added or edited since `python -m torchlint.docs` last ran runs as it is written:
    the catalog is a cache of rules/, not the list of rules); an entry whose module is
    gone is left out."""
    package = rules_package()
    modules = rule_modules(package)
    rules: dict[str, type[Rule]] = {}
    current = fingerprint(RULE_API) == RULE_API_FINGERPRINT
    for entry in CATALOG:
        stand_in = _deferred(entry)
        listed = cast(_Deferred, stand_in).module
        if current and listed in modules and fingerprint(modules[listed]) == entry[-1]:
            rules[entry[0]] = stand_in
            del modules[listed]
    for name in modules:  # not in the catalog, or changed since
        for rule in _defined(importlib.import_module(f"{package.__name__}.{name}")):
            rules[rule.code] = rule
    return rules


@cache
def all_rules() -> dict[str, type[Rule]]:
    """The built-in rules and those of the installed plugins: code -> rule class, sorted
    by code (RuleLoadError for a plugin that cannot be loaded or claims a code taken).
    The built-in ones are imported when first used (`loaded`)."""
    rules = _shipped()
    for entry in sorted(entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        origin = f"plugin {entry.dist.name if entry.dist else entry.name}"
        try:
            module = entry.load()
        except Exception as exc:
            raise RuleLoadError(
                f"{origin}: entry point `{entry.value}` cannot be imported: {_said(exc)}"
            ) from None
        if not isinstance(module, ModuleType):
            raise RuleLoadError(f"{origin}: entry point `{entry.value}` must name a module")
        for each in _package_modules(module, origin):
            _add(rules, _checked(each, origin, _file(each)))
    return _consistent(rules)


def _consistent(rules: dict[str, type[Rule]]) -> dict[str, type[Rule]]:
    """`rules` sorted by code; RuleLoadError if two declare an option differently."""
    try:
        options_of(rules)
    except OptionCollision as exc:
        raise RuleLoadError(str(exc)) from None
    return dict(sorted(rules.items()))


# Every local rule module loaded in this process, by the file it was loaded from; and
# every local rule, by code (the latest loaded of a code: a process lints one config's
# files, or, in the editor, instantiates a plan's rules from its config).
_local_modules: dict[Path, ModuleType] = {}
_local_rules: dict[str, type[Rule]] = {}
_local_folders: dict[Path, None] = {}  # of the latest config, in order


def local_rules(folders: tuple[Path, ...]) -> dict[str, type[Rule]]:
    """The rules of the modules (`*.py`, but not `_*.py`) of `folders`, by code, with the
    built-in and installed ones (RuleLoadError names a module that cannot be loaded, a
    class without a code, a code taken twice)."""
    rules = _with_local(folders)
    _local_rules.update((c, r) for c, r in rules.items() if r.origin.startswith("local "))
    _local_folders.clear()  # a process lints one config's files at a time
    _local_folders.update(dict.fromkeys(folders))
    return rules


def local_folders() -> tuple[Path, ...]:
    """The folders of the local rules this process loaded last (what a spawned worker
    process, which inherits nothing, loads again)."""
    return tuple(_local_folders)


@cache
def _with_local(folders: tuple[Path, ...]) -> dict[str, type[Rule]]:
    rules = dict(all_rules())
    for folder in folders:
        if not folder.is_dir():
            raise RuleLoadError(f"{folder}: local rules folder not found")
        for path in sorted(folder.glob("*.py")):
            if not path.name.startswith("_"):
                _add(rules, _checked(_load(path), f"local {folder}", str(path)))
    return _consistent(rules)


def find(code: str) -> type[Rule]:
    """The rule of `code`: built-in, installed, or a local rule loaded (KeyError)."""
    return loaded(_standing(code))


def unloaded(codes: Sequence[str]) -> list[type[Rule]]:
    """The rules of `codes` as `find` gives them, but built-in ones as their catalog's
    stand-ins, not imported (what their tokens need). KeyError for an unknown code."""
    return [_standing(code) for code in codes]


def known(code: str) -> type[Rule] | None:
    """The rule of `code` (built-in, installed, or a local rule loaded), if any."""
    try:
        return find(code)
    except KeyError:
        return None


def _standing(code: str) -> type[Rule]:
    """The rule of `code`, a built-in one as its catalog's stand-in (KeyError)."""
    rule = all_rules().get(code) or _local_rules.get(code)
    if rule is None:
        raise KeyError(code)
    return rule


def extension_files() -> list[Path]:
    """The files of the local rules loaded and of the installed plugins' rules: what they
    compute depends on them (the result cache's key)."""
    files = {
        Path(_file(sys.modules[rule.__module__]))
        for rule in all_rules().values()
        if rule.origin != "built-in"
    }
    return sorted(files | set(_local_modules))


def _load(path: Path) -> ModuleType:
    """A local rule module, imported from its file (once per process)."""
    path = path.resolve()
    if path in _local_modules:
        return _local_modules[path]
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    name = f"torchlint_local_{path.stem}_{digest}"  # one per file, whatever its folder
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RuleLoadError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[name]
        raise RuleLoadError(f"{path}:{exc.lineno}: invalid syntax: {exc.msg}") from None
    except Exception as exc:
        del sys.modules[name]
        raise RuleLoadError(f"{path}: cannot be imported: {_said(exc)}") from None
    _local_modules[path] = module
    return module


def _package_modules(module: ModuleType, origin: str) -> list[ModuleType]:
    """A plugin's module, or a package's modules (its own and each of its submodules)."""
    if not hasattr(module, "__path__"):
        return [module]
    found = [module]
    for info in pkgutil.iter_modules(module.__path__):
        name = f"{module.__name__}.{info.name}"
        try:
            found.append(importlib.import_module(name))
        except Exception as exc:
            raise RuleLoadError(f"{origin}: `{name}` cannot be imported: {_said(exc)}") from None
    return found


def _defined(module: ModuleType) -> list[type[Rule]]:
    """The Rule subclasses a module defines (not those it imports)."""
    from torchlint.rule import Rule

    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Rule)
        and value is not Rule
        and value.__module__ == module.__name__
    ]


def _checked(module: ModuleType, origin: str, where: str) -> list[type[Rule]]:
    """The rules of a local or plugin module, each marked with its origin; RuleLoadError
    (naming `where`) for one without a code and a name, or with a built-in's prefix."""
    rules = _defined(module)
    for rule in rules:
        code = getattr(rule, "code", None)
        if not isinstance(code, str) or not CODE.fullmatch(code):
            raise RuleLoadError(
                f"{where}: rule class `{rule.__name__}` needs a `code`: letters then digits, "
                f"such as X100 (got {code!r})"
            )
        if code.startswith("TL"):
            raise RuleLoadError(
                f"{where}: rule {code}: the TL prefix is the built-in rules'; choose another"
            )
        if not isinstance(getattr(rule, "name", None), str):
            raise RuleLoadError(f"{where}: rule {code} needs a `name`, such as `no-save-in-step`")
        rule.origin = origin
    return rules


def _add(rules: dict[str, type[Rule]], found: list[type[Rule]]) -> None:
    for rule in found:
        taken = rules.get(rule.code)
        if taken is not None and taken is not rule:
            where = _file(sys.modules[rule.__module__])
            raise RuleLoadError(
                f"{where}: rule {rule.code} is already defined by "
                f"{_file(sys.modules[taken.__module__])}; codes are unique"
            )
        rules[rule.code] = rule


def _file(module: ModuleType) -> str:
    return getattr(module, "__file__", None) or module.__name__


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def options_of(rules: dict[str, type[Rule]]) -> dict[str, Option[Any]]:
    """Every option the rules declare, by name, sorted; rules that share a name must
    share its declaration (type, default, range, doc), else OptionCollision names both."""
    declared: dict[str, tuple[str, Option[Any]]] = {}
    for code, rule in rules.items():
        for option in rule.options:
            first = declared.setdefault(option.name, (code, option))
            if first[1] != option:
                raise OptionCollision(
                    f"option `{option.name}` is declared differently by {first[0]} "
                    f"({first[1].summary()}) and {code} ({option.summary()}): rules that "
                    "share an option share its declaration"
                )
    return {name: option for name, (_, option) in sorted(declared.items())}
