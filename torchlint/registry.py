"""Finds every rule in the `torchlint.rules` package (the repository's `rules/`)."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from torchlint.options import Option
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
    package = Path(__file__).resolve().parent
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
    return module


@cache
def all_rules() -> dict[str, type[Rule]]:
    """code -> rule class, sorted by code."""
    package = rules_package()
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                if value.code in found:
                    raise RuntimeError(f"two rules claim {value.code}")
                found[value.code] = value
    rules = dict(sorted(found.items()))
    options_of(rules)  # raises on a collision
    return rules


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
