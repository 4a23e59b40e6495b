"""`[tool.torchlint.semantic]`: what a project tells the analysis about callables it
cannot see (a shared library's training helpers), read into `Knowledge`.

Each key is a list of entries: a qualified name as the code imports it
(`"mylib.train.backward_and_step"`), or a table with `name` and the key's options. A
name whose module is a file of the project (at the config's folder or in its `src/`)
must be defined there; a name from outside the project cannot be checked and is taken
as written.
"""

from __future__ import annotations

import ast
import difflib
import keyword
from dataclasses import asdict
from pathlib import Path
from typing import Any

from torchlint.settings import Knowledge, LoaderFactory, StepFunction

# key -> its options in an entry's table, and their types ("argument": the parameter a
# call passes it to, by name (a keyword) or by position, counted from 0).
OPTIONS: dict[str, dict[str, str]] = {
    "step-functions": {"backward": "bool", "step": "bool", "optimizer": "argument"},
    "loader-factories": {"batch-size": "argument", "workers": "argument", "pin-memory": "argument"},
    "model-factories": {},
    "device-functions": {},
}


class KnowledgeError(ValueError):
    """A malformed `[tool.torchlint.semantic]` table; the message names the key."""


def read_knowledge(table: Any, root: Path) -> Knowledge:
    """The knowledge a `[tool.torchlint.semantic]` table gives; names of the project's
    own modules are looked up under `root`."""
    if not isinstance(table, dict):
        raise KnowledgeError("`semantic` must be a table ([tool.torchlint.semantic])")
    entries: dict[str, list[dict[str, Any]]] = {}
    seen: dict[str, str] = {}
    for key, value in table.items():
        if key not in OPTIONS:
            close = difflib.get_close_matches(key, list(OPTIONS), n=1)
            hint = f" (did you mean `semantic.{close[0]}`?)" if close else ""
            raise KnowledgeError(f"unknown key `semantic.{key}`{hint}")
        where = f"`semantic.{key}`"
        if not isinstance(value, list):
            raise KnowledgeError(f"{where} must be a list of qualified names or tables")
        entries[key] = [_entry(where, item, OPTIONS[key]) for item in value]
        for entry in entries[key]:
            name = entry["name"]
            if name in seen:
                raise KnowledgeError(f"{where}: `{name}` is named twice (also in {seen[name]})")
            seen[name] = where
            _check_defined(where, name, root)
    steps = entries.get("step-functions", [])
    for entry in steps:
        if not entry.get("backward", True) and not entry.get("step", True):
            raise KnowledgeError(
                f"`semantic.step-functions`: `{entry['name']}` runs neither a backward pass "
                "nor a step (`backward` and `step` are both false)"
            )
    return Knowledge(
        step_functions=tuple(StepFunction(**_fields(e)) for e in steps),
        loader_factories=tuple(
            LoaderFactory(**_fields(e)) for e in entries.get("loader-factories", [])
        ),
        model_factories=tuple(e["name"] for e in entries.get("model-factories", [])),
        device_functions=tuple(e["name"] for e in entries.get("device-functions", [])),
    )


def written(knowledge: Knowledge) -> dict[str, list[Any]]:
    """The knowledge as `[tool.torchlint.semantic]` writes it, key by key: an entry's
    name alone where its options are the defaults (what `--show-settings` prints)."""
    tables: dict[str, tuple[Any, ...]] = {
        "step-functions": knowledge.step_functions,
        "loader-factories": knowledge.loader_factories,
        "model-factories": knowledge.model_factories,
        "device-functions": knowledge.device_functions,
    }
    out: dict[str, list[Any]] = {}
    for key, entries in tables.items():
        out[key] = []
        for entry in entries:
            if isinstance(entry, str):
                out[key].append(entry)
                continue
            default = type(entry)(entry.name)
            options = {
                k.replace("_", "-"): v
                for k, v in asdict(entry).items()
                if k != "name" and v != getattr(default, k)
            }
            out[key].append({"name": entry.name, **options} if options else entry.name)
    return out


def _fields(entry: dict[str, Any]) -> dict[str, Any]:
    return {k.replace("-", "_"): v for k, v in entry.items()}


def _entry(where: str, item: Any, options: dict[str, str]) -> dict[str, Any]:
    """One entry as a table (`name` and options), validated."""
    entry = {"name": item} if isinstance(item, str) else item
    if not isinstance(entry, dict):
        raise KnowledgeError(f"{where}: an entry must be a qualified name or a table, got {item!r}")
    name = entry.get("name")
    if not isinstance(name, str):
        raise KnowledgeError(f"{where}: a table entry needs `name`, a qualified name")
    if not _dotted(name):
        raise KnowledgeError(
            f'{where}: "{name}" is not a qualified name (a module and a name in it, '
            'such as "mylib.train.step")'
        )
    for option, value in entry.items():
        if option == "name":
            continue
        kind = options.get(option)
        if kind is None:
            known = ["name", *options]
            close = difflib.get_close_matches(option, known, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            listed = ", ".join(f"`{k}`" for k in known)
            raise KnowledgeError(
                f"{where}: unknown key `{option}` in the entry for `{name}`{hint}; "
                f"an entry takes {listed}"
            )
        if kind == "bool" and not isinstance(value, bool):
            raise KnowledgeError(f"{where}: `{option}` of `{name}` must be true or false")
        if kind == "argument" and not _argument(value):
            raise KnowledgeError(
                f"{where}: `{option}` of `{name}` must name a parameter (an identifier) or "
                f"give its position (0, 1, ...), got {value!r}"
            )
    return entry


def _argument(value: Any) -> bool:
    if isinstance(value, str):
        return _identifier(value)
    return type(value) is int and value >= 0


def _identifier(text: str) -> bool:
    return text.isidentifier() and not keyword.iskeyword(text)


def _dotted(name: str) -> bool:
    parts = name.split(".")
    return len(parts) >= 2 and all(_identifier(p) for p in parts)


def _check_defined(where: str, name: str, root: Path) -> None:
    """A name whose module is a file of the project names something defined there."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = _module_file(root, parts[:cut])
        if module is None:
            continue
        try:
            tree = ast.parse(module.read_bytes())
        except (OSError, SyntaxError, ValueError):
            return  # not ours to judge: the run reports the file
        if not _defines(tree.body, parts[cut:]):
            rel = module.relative_to(root).as_posix()
            raise KnowledgeError(
                f"{where}: `{name}` resolves to nothing: {rel} defines no `{'.'.join(parts[cut:])}`"
            )
        return


def _module_file(root: Path, parts: list[str]) -> Path | None:
    for base in (root, root / "src"):
        for candidate in (
            base.joinpath(*parts).with_suffix(".py"),
            base.joinpath(*parts, "__init__.py"),
        ):
            if candidate.is_file():
                return candidate
    return None


def _defines(body: list[ast.stmt], names: list[str]) -> bool:
    """`body` binds `names[0]` (and its class body `names[1:]`); a star import or a
    name bound in a way we do not follow counts as defined."""
    head, rest = names[0], names[1:]
    for node in body:
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == head:
                if rest and isinstance(node, ast.ClassDef):
                    return _defines(node.body, rest)
                return not rest
        elif head in _bound(node):
            return True
    return False


def _bound(node: ast.stmt) -> set[str]:
    """The names a top-level statement may bind (anywhere in it: generous, as only a
    name surely missing is an error)."""
    found: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            found.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return found
