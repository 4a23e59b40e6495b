"""The import contract of docs/architecture.md: data flows down the layers, never back,
and every module stays small enough to read.

Every import counts: function-local ones (they hide cycles as well as any) and those
under `if TYPE_CHECKING:` (an annotation that needs a module above is a layer crossed)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import libcst as cst
import pytest

import torchlint.semantic as semantic

from .conftest import ROOT

PACKAGE = ROOT / "torchlint"
RULES = ROOT / "rules"
# The layers of torchlint/, top to bottom, by package or module (`rules` is `rules/`,
# `torchlint` the package's own `__init__`): a module imports modules of its own layer
# or of layers below it.
LAYERS = [
    ["__main__", "cli"],  # `python -m torchlint`, the typer app
    ["server", "verify", "explain"],  # they run files as the CLI's check does
    ["run", "docs", "testing"],  # many files; the rule pages; a rule author's fixtures
    # `torchlint`: the package's `__version__`, and the public API (`api`) it forwards
    ["project", "config", "reporters", "torchlint"],
    ["lint", "rules"],  # one file; the rules it runs
    ["rule", "edits", "api"],
    ["semantic", "fixes"],
    ["text", "results", "settings", "options"],
]
# The one import allowed to run from a lower layer up, and why.
UPWARD = {
    ("torchlint.verify.__main__", "torchlint.cli.app"): (
        "`python -m torchlint.verify` is an entry point: it runs the CLI's verify command"
    ),
}
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# The semantic layer, top to bottom: each module imports only modules before it.
SEMANTIC_ORDER = [
    "syntax", "reads", "lattice", "portable", "scopes", "external", "builder", "functions",
    "values",
    "threads",
    "samples",
    "devices", "checkpoints", "models", "networks", "loops", "reaching", "loader_classes",
    "spreads", "loaders",
    "frameworks", "runs", "placement", "workload", "datasets", "module",
    "batches", "sizes", "host", "flow", "gradients",
    "exports",
]  # fmt: skip


def module_name(path: Path) -> str:
    if path.is_relative_to(RULES):
        parts = ["torchlint", "rules", *path.relative_to(RULES).with_suffix("").parts]
    else:
        parts = ["torchlint", *path.relative_to(PACKAGE).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources() -> dict[str, Path]:
    return {module_name(p): p for p in [*PACKAGE.rglob("*.py"), *RULES.glob("*.py")]}


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The modules of this project that `path` imports, anywhere in it."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
        stack.extend(ast.iter_child_nodes(node))
    return {m for m in found if m in known}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = sources()
    known = set(found)
    return {name: imports(path, name, known) for name, path in found.items()}


def test_no_rule_imports_another_rule(graph):
    offenders = {
        name: sorted(m for m in deps if m.startswith("torchlint.rules."))
        for name, deps in graph.items()
        if name.startswith("torchlint.rules.")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_core_never_imports_the_cli(graph):
    """Only entry points (`python -m torchlint`, `python -m torchlint.verify`) do."""
    cli = {n for n in graph if n == "torchlint.cli" or n.startswith("torchlint.cli.")}
    importers = sorted(n for n, deps in graph.items() if deps & cli and n not in cli)
    assert [n for n in importers if not n.endswith("__main__")] == []


def test_rules_read_the_semantic_layer_not_the_engine(graph):
    engine = {"cli", "server", "verify", "explain", "run", "project", "config", "reporters", "lint"}
    offenders = {
        n: sorted(d for d in deps if layer_of(d) in engine)
        for n, deps in graph.items()
        if n.startswith("torchlint.rules.")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_rules_reach_the_facts_through_the_semantic_package(graph):
    """One way into the facts: a rule imports what it reads from `torchlint.semantic` (the
    names its `__init__` exports), never from a submodule, and reads nothing of the walk's
    internals (`module.facts`): `TorchModule` names what rules read of them."""
    submodules = {
        n: sorted(d for d in deps if d.startswith("torchlint.semantic."))
        for n, deps in graph.items()
        if n.startswith("torchlint.rules.")
    }
    internals = [
        f"{path.name}:{node.lineno}"
        for path in sorted(RULES.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == "facts"
    ]
    assert {k: v for k, v in submodules.items() if v} == {}
    assert internals == []


def views(module: semantic.TorchModule) -> dict[str, object]:
    """The analyses a `TorchModule` holds, by attribute: objects of a class of the semantic
    layer other than the walk's own records (`Facts`, the module's `Scope`)."""
    own = ("torchlint.semantic.builder", "torchlint.semantic.scopes")
    return {
        name: value
        for name, value in vars(module).items()
        if type(value).__module__.startswith("torchlint.semantic.")
        and type(value).__module__ not in own
    }


def forwarders(text: str, class_name: str, names: set[str]) -> list[str]:
    """The methods and properties of class `class_name` whose body (past its docstring) is
    only `return self.<view>.<attr>` or `return self.<view>.<attr>(...)`, `<view>` one of
    `names`: a call handed on, not a fact of the class."""
    tree = ast.parse(text)
    (body,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    found = []
    for node in body.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        statements = [s for s in node.body if not isinstance(s, ast.Expr)]
        if len(statements) != 1 or not isinstance(statements[0], ast.Return):
            continue
        value = statements[0].value
        value = value.func if isinstance(value, ast.Call) else value
        if (
            isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Attribute)
            and isinstance(value.value.value, ast.Name)
            and value.value.value.id == "self"
            and value.value.attr in names
        ):
            found.append(node.name)
    return found


def test_the_module_holds_views_not_forwarders():
    """One way into an analysis: `module.loaders.pins_memory(loader)`, never a copy of
    its method on the module (`module.pins_memory`) nor a method that only hands the call
    on. What stays on `TorchModule` is the walk's index and what combines several views."""
    module = semantic.build(cst.parse_module("import torch\nx = torch.zeros(3)\n"))
    found = views(module)
    assert {"loaders", "models", "runs", "workload", "placement", "devices"} <= set(found)
    copied = [n for n, v in vars(module).items() if inspect.ismethod(v)]
    assert copied == []
    text = (PACKAGE / "semantic" / "module.py").read_text(encoding="utf-8")
    assert forwarders(text, "TorchModule", set(found)) == []
    sample = (
        "class M:\n"
        "    def f(self, x):\n        'Doc.'\n        return self.runs.f(x)\n"
        "    @property\n    def g(self):\n        return self.runs.g\n"
        "    def h(self, x):\n        return self.facts.h(x)\n"
        "    def k(self, x):\n        return not self.runs.k(x)\n"
    )
    assert forwarders(sample, "M", {"runs"}) == ["f", "g"]


def test_the_views_are_documented_in_one_table():
    """docs/semantic.md's table of views has one row per analysis a `TorchModule` holds."""
    text = (ROOT / "docs" / "semantic.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `module\.(\w+)` \|", text, re.MULTILINE)
    assert sorted(rows) == sorted(views(semantic.build(cst.parse_module(""))))


def test_the_rule_api_reaches_the_facts_through_the_semantic_package(graph):
    """What a rule imports beside the facts (the rule API, the edits fixes use, the public
    names) reads them as a rule does: from `torchlint.semantic`, never a submodule."""
    modules = ("torchlint.rule", "torchlint.edits", "torchlint.api")
    submodules = {
        n: sorted(d for d in graph[n] if d.startswith("torchlint.semantic.")) for n in modules
    }
    assert {k: v for k, v in submodules.items() if v} == {}


def test_the_semantic_package_gives_each_name_from_its_module():
    """`torchlint.semantic` loads its names on first use, looking through its modules in
    turn: each name it exports is the object of the module its annotations import it from."""
    init = PACKAGE / "semantic" / "__init__.py"
    homes = {
        alias.name: node.module
        for node in ast.walk(ast.parse(init.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torchlint.")
        for alias in node.names
    }
    assert sorted(homes) == sorted(semantic.__all__)
    for name, home in homes.items():
        assert getattr(semantic, name) is getattr(importlib.import_module(home), name), name


def test_the_language_server_is_imported_by_the_cli_only(graph):
    """And pygls/lsprotocol (the optional server extra) by the language server only."""
    importers = sorted(
        n
        for n, deps in graph.items()
        if not n.startswith("torchlint.server")
        and any(d.startswith("torchlint.server") for d in deps)
    )
    assert importers == ["torchlint.cli.server"]
    lsp_users = set()
    for name, path in sources().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            if roots & {"pygls", "lsprotocol"}:
                lsp_users.add(name)
    lsp = {"lsp", "protocol", "actions", "shapes"}  # not analysis, projects, settings, text
    assert lsp_users == {f"torchlint.server.{name}" for name in lsp}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                found.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return found


def test_the_graph_sees_local_and_annotation_imports_and_cycles(graph):
    assert "torchlint.verify.command" in graph["torchlint.cli.verify"]  # imported in a function
    assert "torchlint.lint.incremental" in graph["torchlint.lint.linter"]  # under TYPE_CHECKING
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_cycles(graph):
    assert cycles(graph) == []


def test_results_and_settings_are_leaves(graph):
    """Plain types every layer shares: results reads only the settings (in annotations)."""
    assert graph["torchlint.settings"] == set()
    assert graph["torchlint.results"] <= {"torchlint.settings"}


def layer_of(module: str) -> str:
    """The entry of LAYERS a module of torchlint belongs to."""
    parts = module.split(".")
    return "torchlint" if len(parts) == 1 else parts[1]


def upward(graph: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """The imports that run from a layer up to a higher one, as `importer -> imported`."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    return sorted(
        f"{name} -> {dep}"
        for name, deps in graph.items()
        for dep in deps
        if rank[layer_of(dep)] < rank[layer_of(name)]
    )


def test_every_module_has_a_layer(graph):
    placed = [name for layer in LAYERS for name in layer]
    assert len(placed) == len(set(placed))
    missing = sorted({layer_of(m) for m in graph} - set(placed))
    assert missing == [], f"place these in LAYERS (tests/test_layers.py): {missing}"


def test_imports_run_down_the_layers(graph):
    assert len(UPWARD) <= 1
    found = upward(graph, LAYERS)
    allowed = [f"{a} -> {b}" for a, b in UPWARD]
    assert [i for i in found if i not in allowed] == [], "imports from a lower layer up"
    assert sorted(allowed) == [i for i in found if i in allowed]  # each still needed


def test_the_layers_are_few_and_folders_hold_them():
    """A newcomer reads the layers off the folders: at most eight, and beside the
    packages only the entry point, the face, the rule API and the shared plain types."""
    assert len(LAYERS) <= 8
    flat = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert flat == [
        "__main__",
        "api",
        "docs",
        "edits",
        "options",
        "results",
        "rule",
        "settings",
        "testing",
    ]


def test_an_upward_import_is_seen():
    graph = {"torchlint.cli": {"torchlint.text.walk"}, "torchlint.text.walk": {"torchlint.cli"}}
    assert upward(graph, [["cli"], ["text"]]) == ["torchlint.text.walk -> torchlint.cli"]
    assert upward(graph, [["cli", "text"]]) == []


def too_long(text: str, where: str) -> list[str]:
    """The module itself if over MAX_MODULE_LINES, and its functions over
    MAX_FUNCTION_LINES (nested ones and methods too), with their lengths."""
    found = []
    if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
        found.append(f"{where}: {lines} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    return found


def test_modules_and_functions_are_small():
    offenders = [
        o
        for path in sorted(sources().values())
        for o in too_long(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    ]
    assert offenders == [], (
        f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a function:\n"
        + "\n".join(offenders)
    )


def test_sizes_are_measured():
    def function(lines: int) -> str:
        return "class C:\n    def f(self):\n" + "        pass\n" * (lines - 1)

    limit = function(MAX_FUNCTION_LINES)
    assert too_long(limit, "m.py") == []
    assert too_long(function(MAX_FUNCTION_LINES + 1), "m.py") == ["m.py:2 f: 81 lines"]
    longest = limit + "x = 1\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES - 1)
    assert too_long(longest, "m.py") == []
    assert too_long(longest + "x = 1\n", "m.py") == ["m.py: 601 lines"]


def calling_themselves(text: str, where: str) -> list[str]:
    """Nested functions that call themselves: each call of the outer one leaves a
    reference cycle (the function, its closure) holding what it closes over (a file's
    model, its tree) until the cyclic collector comes by."""
    found: list[str] = []
    for outer in ast.walk(ast.parse(text)):
        if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in ast.walk(outer):
            if inner is outer or not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            read = {n.id for n in ast.walk(inner) if isinstance(n, ast.Name)}
            if inner.name in read:
                found.append(f"{where}:{inner.lineno} {outer.name}.{inner.name}")
    return found


def test_no_nested_function_calls_itself():
    offenders = [
        o
        for path in sorted(sources().values())
        for o in calling_themselves(path.read_text(encoding="utf-8"), path.name)
    ]
    assert offenders == []
    cycle = "def f(m):\n    def go(n):\n        go(n - 1)\n    go(m)\n"
    assert calling_themselves(cycle, "m.py") == ["m.py:2 f.go"]


def test_semantic_layers_import_downward_only(graph):
    assert sorted(m.rpartition(".")[2] for m in graph if m.startswith("torchlint.semantic.")) == (
        sorted(SEMANTIC_ORDER)
    )
    for i, layer in enumerate(SEMANTIC_ORDER):
        deps = {
            d.rpartition(".")[2]
            for d in graph[f"torchlint.semantic.{layer}"]
            if d.startswith("torchlint.semantic")
        }
        assert deps <= set(SEMANTIC_ORDER[:i]), (layer, sorted(deps - set(SEMANTIC_ORDER[:i])))


def test_the_semantic_layer_computes_facts_and_never_builds_fixes():
    """Not even for annotations: a fix is built from facts in `edits.py` or in a rule, and
    the project layer hands `semantic/` what it knows through `semantic.external`."""
    found = sources()
    known = set(found)
    above = {"torchlint.fixes", "torchlint.edits", "torchlint.project"}
    offenders = {
        name: sorted(m for m in imports(path, name, known) if ".".join(m.split(".")[:2]) in above)
        for name, path in found.items()
        if name.startswith("torchlint.semantic")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_the_verifier_imports_torch_and_only_lazily():
    for name, path in sources().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = {a.name.split(".")[0] for n in top for a in n.names if isinstance(n, ast.Import)}
        names |= {(n.module or "").split(".")[0] for n in top if isinstance(n, ast.ImportFrom)}
        assert not names & {"torch", "pynvml"}, name
        if not name.startswith("torchlint.verify"):
            text = path.read_text(encoding="utf-8")
            assert "import torch\n" not in text and "import pynvml" not in text, name


def test_the_map_draws_these_layers_and_stays_short():
    """docs/architecture.md's picture names the layers of LAYERS in their order, and the
    map stays a ten-minute read."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    drawn = {}  # layer number -> the names before the description (3 spaces or more)
    for line in text.splitlines():
        number, _, rest = line.strip().partition(" ")
        if number.isdigit() and line.startswith(" "):
            names = re.split(r"\s{3,}", rest.strip())[0]
            drawn[int(number)] = sorted(names.replace("/", "").split())
    assert drawn == {i: sorted(layer) for i, layer in enumerate(LAYERS, start=1)}


def test_a_file_reaches_a_rule_in_ten_calls_without_climbing_back(tmp_path, monkeypatch):
    """The path of one file from the CLI's `check` to a rule's `check` (docs/architecture.md):
    at most 10 calls, and once in the one-file code (`lint/`), never back in the run layer."""
    import traceback

    from torchlint.lint.registry import builtin_rules

    from .conftest import run_cli

    stacks: list[list[traceback.FrameSummary]] = []
    rule = builtin_rules()["TL401"]
    check = rule.check

    def recorded(self, module):  # type: ignore[no-untyped-def]
        stacks.append(traceback.extract_stack()[:-1])
        return check(self, module)

    monkeypatch.setattr(rule, "check", recorded)
    (tmp_path / "train.py").write_text("import torch\nloss = torch.ones(1)\nloss.backward()\n")
    run_cli("check", "--no-cache", "--select", "TL401", str(tmp_path))
    assert stacks, "the rule never ran"
    frames = stacks[0]
    start = max(
        i
        for i, f in enumerate(frames)
        if f.name == "check" and Path(f.filename).as_posix().endswith("torchlint/cli/check.py")
    )
    path = [(Path(f.filename).parent.name, f.name) for f in frames[start:]]
    assert len(path) <= 10, path
    first_lint = next(i for i, (folder, _) in enumerate(path) if folder == "lint")
    assert all(folder != "run" for folder, _ in path[first_lint:]), path
