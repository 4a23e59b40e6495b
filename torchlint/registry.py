"""Finds every rule in the `torchlint.rules` package (the repository's `rules/`)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

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


@cache
def all_rules() -> dict[str, type[Rule]]:
    """code -> rule class, sorted by code."""
    import torchlint.rules as package

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
    return dict(sorted(found.items()))
