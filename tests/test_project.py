"""The whole-program layer: facts that cross functions, files and framework wrappers.

fixtures/project/<shape>/ is a project (its pyproject.toml selects the rules the shape
exercises); every line that must be reported ends in `# error: CODE[, CODE]`, and every
other line must stay silent. Each shape is checked as a whole project and file by file
from its root (what a pre-commit hook does with the files of a commit), through the
run's real machinery (discovery, rounds, worker processes, the cache), and must find
exactly the marked lines both ways; each shape needs the project (the same files checked
each alone miss some of them).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from torchlint.config.load import load_config
from torchlint.lint.notebook import Notebook
from torchlint.project import Layout, Program
from torchlint.results import Question
from torchlint.run.files import run
from torchlint.semantic.external import Call, Environment, Function, Summary, Uses
from torchlint.semantic.lattice import CUDA
from torchlint.semantic.portable import OPTIMIZER, Effect, Value

from .conftest import FIXTURES, plan_of

SHAPES = sorted(p for p in (FIXTURES / "project").iterdir() if p.is_dir())
# Shapes whose facts lie in one file (a module loaded from a checkpoint; a library
# function nothing calls), checked in a project like the others.
ONE_FILE = {"checkpoint", "unresolved"}
# Shapes whose point is a near miss only the project shows: alone, a file reports more.
NEAR_MISS_ACROSS_FILES = {"saved_by_helper", "text_dataset"}
# A finding's mark, whatever its impact (`run` reports both).
MARK = re.compile(r"#\s*(?:error|low):\s*(?P<codes>TL\d+(?:\s*,\s*TL\d+)*)")
Finding = tuple[str, int, str]  # file key, line, code


def _files(root: Path) -> list[Path]:
    return sorted([*root.rglob("*.py"), *root.rglob("*.ipynb")])


def _texts(root: Path, path: Path) -> Iterator[tuple[str, str]]:
    """A file's key and text; a notebook's cells each as "key:cell N" and its source."""
    key = path.relative_to(root).as_posix()
    if path.suffix != ".ipynb":
        yield key, path.read_text(encoding="utf-8")
        return
    for cell in Notebook.parse(path.read_text(encoding="utf-8")).cells:
        yield f"{key}:cell {cell.number}", cell.source


def _marks(root: Path) -> set[Finding]:
    found = set()
    for path in _files(root):
        for key, text in _texts(root, path):
            for number, line in enumerate(text.splitlines(), 1):
                for m in MARK.finditer(line):
                    found |= {(key, number, c.strip()) for c in m.group("codes").split(",")}
    return found


def _key(root: Path, path: str, cell: int | None) -> str:
    key = Path(path).absolute().relative_to(root).as_posix()
    return key if cell is None else f"{key}:cell {cell}"


def _check(root: Path, files: list[Path], cache: Path | None = None) -> set[Finding]:
    config = load_config(root / "pyproject.toml")
    results = run(plan_of(config), files, cache_dir=cache, bases=dict.fromkeys(files, root)).results
    errors = [(r.path, r.error) for r in results if r.error]
    assert not errors, errors
    return {(_key(root, r.path, v.cell), v.line, v.code) for r in results for v in r.violations}


@pytest.fixture
def copy(tmp_path: Path, request) -> Path:
    root = tmp_path / request.param.name
    shutil.copytree(request.param, root)
    return root


@pytest.mark.parametrize("copy", SHAPES, ids=lambda p: p.name, indirect=True)
def test_whole_project_and_file_by_file(copy: Path, monkeypatch, tmp_path: Path):
    monkeypatch.chdir(copy)
    expected = _marks(copy)
    assert _check(copy, _files(copy)) == expected
    by_file: set[Finding] = set()
    cache = tmp_path / "cache"  # a pre-commit run after the first: summaries stored
    for path in _files(copy):
        by_file |= _check(copy, [path], cache)
    assert by_file == expected


@pytest.mark.parametrize(
    "shape",
    [s for s in SHAPES if s.name not in ONE_FILE | NEAR_MISS_ACROSS_FILES],
    ids=lambda p: p.name,
)
def test_every_shape_needs_the_project(shape: Path, tmp_path: Path, monkeypatch):
    """Each file alone, in a folder of its own, misses some marked line: the fixture
    exercises what crosses files."""
    alone: set[Finding] = set()
    for path in _files(shape):
        key = path.relative_to(shape).as_posix()
        folder = tmp_path / key.replace("/", "_")
        folder.mkdir()
        shutil.copyfile(shape / "pyproject.toml", folder / "pyproject.toml")
        shutil.copyfile(path, folder / path.name)
        monkeypatch.chdir(folder)
        alone |= {
            (key + found.removeprefix(path.name), line, code)
            for found, line, code in _check(folder, [folder / path.name])
        }
    assert alone < _marks(shape)


def test_an_edit_elsewhere_checks_a_file_again(tmp_path: Path, monkeypatch):
    """The cached result of a file holds while what the project tells it does: moving
    the training to the CPU in train.py silences engine.py's per-step sync, with
    engine.py itself unchanged and its result cached."""
    root = tmp_path / "engine_layout"
    shutil.copytree(FIXTURES / "project" / "engine_layout", root)
    monkeypatch.chdir(root)
    cache = tmp_path / "cache"
    engine = root / "mypkg" / "engine.py"
    assert ("mypkg/engine.py", 12, "TL401") in _check(root, _files(root), cache)
    train = root / "train.py"
    text = train.read_text()
    train.write_text(text.replace('"cuda" if torch.cuda.is_available() else "cpu"', '"cpu"'))
    after = _check(root, [engine], cache)
    assert ("mypkg/engine.py", 12, "TL401") not in after
    train.write_text(text)
    assert ("mypkg/engine.py", 12, "TL401") in _check(root, [engine], cache)


# -- the pieces --------------------------------------------------------------------------


def _layout(tmp_path: Path, files: dict[str, str]) -> Layout:
    for key, text in files.items():
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Layout(tmp_path, [tmp_path / k for k in files])


def test_a_file_of_the_home_folder_is_read_alone(tmp_path: Path, monkeypatch):
    """No marker above it, and the folder is the home folder: its siblings are not read
    (the helper's `.item()`, per step only through engine.py, is not reported); the same
    files in a folder of their own are a project."""
    home, folder = tmp_path / "home", tmp_path / "work"
    for root in (home, folder):
        shutil.copytree(FIXTURES / "project" / "helpers", root)
        (root / "pyproject.toml").unlink()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    config = load_config(None)
    for root, expected in ((home, []), (folder, [4])):
        path = root / "utils.py"
        (result,) = run(plan_of(config), [path], bases={path: root}).results
        assert [(v.line, v.code) for v in result.violations] == [(n, "TL401") for n in expected]


def test_a_method_of_another_file_that_returns_self_gives_back_its_object(
    tmp_path: Path, monkeypatch
):
    """`net.frozen().cuda()`: `frozen` (models.py) returns `self`, so the model trained is
    `net`, a network on the GPU (its optimizer is told to fuse)."""
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchlint]\npreview = true\nextend-select = ["TL605"]\n'
    )
    (tmp_path / "models.py").write_text(
        "import torch.nn as nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.body = nn.Linear(8, 2)\n\n"
        "    def forward(self, x):\n        return self.body(x)\n\n"
        "    def frozen(self):\n        self.body.requires_grad_(False)\n        return self\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nimport torch.nn.functional as F\n\nfrom models import Net\n\n"
        "def main(loader):\n    net = Net()\n    model = net.frozen().cuda()\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # error: TL605\n"
        "    for x, y in loader:\n        x, y = x.cuda(), y.cuda()\n"
        "        loss = F.cross_entropy(model(x), y)\n        optimizer.zero_grad()\n"
        "        loss.backward()\n        optimizer.step()\n"
    )
    monkeypatch.chdir(tmp_path)
    assert ("train.py", 9, "TL605") in _check(tmp_path, _files(tmp_path))


def test_imports_resolve_as_python_finds_them(tmp_path: Path):
    layout = _layout(
        tmp_path,
        {
            "src/pkg/__init__.py": "",
            "src/pkg/models.py": "",
            "src/pkg/sub/__init__.py": "",
            "src/pkg/sub/engine.py": "",
            "src/ns/heads.py": "",  # a namespace package
            "scripts/train.py": "",
            "scripts/helpers.py": "",
            "utils.py": "",
        },
    )
    resolve = layout.resolve
    assert resolve("scripts/train.py", "helpers.f") == ("scripts/helpers.py", ("f",))
    assert resolve("scripts/train.py", "pkg.models.Net") == ("src/pkg/models.py", ("Net",))
    assert resolve("scripts/train.py", "pkg.Net") == ("src/pkg/__init__.py", ("Net",))
    assert resolve("scripts/train.py", "ns.heads.Head") == ("src/ns/heads.py", ("Head",))
    assert resolve("src/pkg/sub/engine.py", "..models.Net") == ("src/pkg/models.py", ("Net",))
    assert resolve("src/pkg/sub/engine.py", ".x") == ("src/pkg/sub/__init__.py", ("x",))
    assert resolve("src/pkg/sub/engine.py", "utils.accuracy") == ("utils.py", ("accuracy",))
    assert resolve("scripts/train.py", "torch.nn.Linear") is None
    assert layout.module_exists("scripts/train.py", "ns")
    assert not layout.module_exists("scripts/train.py", "torch")


def test_import_statements_are_read_with_what_they_bind_and_where():
    from torchlint.project.layout import Imported, imported

    text = (
        "import os, pkg.models as models\n"
        "from .engine import (train,  # the loop\n    evaluate as ev,\n)\n"
        "from . import data\n"
        "from .utils import *\n"
        "def main():\n    from ..cli import run\n"
    )
    assert imported(text) == [
        Imported("os", "os", False),
        Imported("pkg.models", "models", False),
        Imported(".engine.train", "train", False),
        Imported(".engine.evaluate", "ev", False),
        Imported(".data", "data", False),
        Imported("..cli.run", "run", True),
    ]


def test_a_name_a_package_re_exports_leads_to_the_file_defining_it(tmp_path: Path):
    """Through a package that re-exports a subpackage's re-export, under an alias, or
    under a condition; importing names from a package is no import of its `__init__.py`
    (which imports every file of the package: the importer would come after them all)."""
    layout = _layout(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.trainer import Trainer\nfrom .utils import *\n",
            "pkg/trainer/__init__.py": "from pkg.trainer.trainer import Trainer\n",
            "pkg/trainer/trainer.py": "",
            "pkg/utils/__init__.py": (
                "from .ops import send\nif HAVE_MEGATRON:\n"
                "    from .megatron import prepare as megatron_prepare\n"
            ),
            "pkg/utils/ops.py": "",
            "pkg/utils/megatron.py": "",
            "pkg/cli.py": "",
            "pkg/loader.py": "",
        },
    )
    assert layout.imports("pkg/cli.py", ["pkg.Trainer"]) == {"pkg/trainer/trainer.py"}
    names = [".utils.send", ".utils.megatron_prepare"]
    assert layout.imports("pkg/loader.py", names) == {"pkg/utils/ops.py", "pkg/utils/megatron.py"}


def _fn(ref: str, *params: str, **facts) -> Function:
    return Function(ref, params, **facts)


def test_linking_follows_values_and_calls_through_chains():
    """train.py passes a CUDA device and a loader to engine.train, which hands both on to
    engine.step_all in a loop; step_all iterates the loader in a training step loop."""
    loader = Value(loaders=frozenset({"data.py#0"}))
    engine = Summary(
        exports={
            "train": _fn("engine.py::train", "loader", "device"),
            "step_all": _fn(
                "engine.py::step_all",
                "batches",
                "device",
                effects=(
                    (
                        "batches",
                        Effect(
                            trains=True,
                            steps=True,
                            gpu=False,
                            devices=frozenset({"engine.py::step_all:device"}),
                        ),
                    ),
                ),
            ),
        },
        calls=[
            Call(
                "engine.py::step_all",
                "train",
                (
                    Value(params=frozenset({"engine.py::train:loader"})),
                    Value(params=frozenset({"engine.py::train:device"})),
                ),
                repeated=True,
                per_step=False,
            )
        ],
    )
    train = Summary(
        calls=[Call("engine.train", None, (loader, Value(device=CUDA)), guarded=True)],
    )
    program = Program(
        Layout(Path("/p"), [Path("/p/engine.py"), Path("/p/train.py")]),
        {"engine.py": engine, "train.py": train},
    )
    passed = program.parameter("engine.py::step_all", "device")
    assert passed is not None and passed.device == CUDA and not passed.params
    assert program.parameter("engine.py::step_all", "batches").loaders == {"data.py#0"}
    callers = program.callers("engine.py::step_all")
    assert callers is not None and callers.repeated and callers.guarded
    uses = program.uses("data.py#0")
    assert uses == Uses(
        trains=True, steps=True, repeated=True, gpu=True, guarded=True, where=uses.where
    )
    assert program.reaches("engine.py") and not program.reaches("train.py")


def test_what_a_call_passes_is_kept_from_one_linking_to_the_next_while_its_file_is_the_same():
    """The project links again after each change: the calls of a file whose summary is
    the same are not read again; a file's new summary is."""
    layout = Layout(Path("/p"), [Path("/p/engine.py"), Path("/p/train.py")])
    engine = Summary(exports={"train": _fn("engine.py::train", "loader", "device")})

    def train(device: Value) -> Summary:
        return Summary(calls=[Call("engine.train", None, (Value(), device))])

    passing: dict = {}
    first = train(Value(device=CUDA))
    summaries = {"engine.py": engine, "train.py": first}
    assert Program(layout, dict(summaries), passing=passing).parameter(
        "engine.py::train", "device"
    ) == Value(device=CUDA)
    kept = passing["train.py"]
    again = Program(layout, dict(summaries), passing=passing)
    assert again.parameter("engine.py::train", "device") == Value(device=CUDA)
    assert passing["train.py"] is kept  # nothing read again
    summaries["train.py"] = train(Value(params=frozenset({"train.py::main:device"})))
    edited = Program(layout, dict(summaries), passing=passing)
    assert edited.parameter("engine.py::train", "device") is None  # what main gets: nothing
    assert passing["train.py"][0] is summaries["train.py"]


def test_stepped_functions_are_called_per_step_from_another_file():
    """engine.log_step runs on every GPU step when train.py's loop calls engine.step, which
    calls it; engine.local_only is run per step by engine.py alone, which its own analysis
    sees (not the project's to tell)."""
    step = Call("engine.py::step", None, (), per_step=True, gpu=True, where="train.py:9")
    engine = Summary(
        exports={name: _fn(f"engine.py::{name}") for name in ("step", "log_step", "local_only")},
        calls=[
            Call("engine.py::log_step", "step", ()),
            Call("engine.py::local_only", "fit", (), per_step=True, gpu=True, where="engine.py:3"),
        ],
    )
    program = Program(
        Layout(Path("/p"), [Path("/p/engine.py"), Path("/p/train.py")]),
        {"engine.py": engine, "train.py": Summary(calls=[replace(step, callee="engine.step")])},
    )
    assert program.stepped("engine.py") == (("log_step", "train.py:9"), ("step", "train.py:9"))


def test_a_file_asks_whether_a_function_it_names_is_stepped():
    """Answers per function: a function the file did not ask about becoming stepped
    leaves its answers holding (it is not analysed again)."""
    layout = Layout(Path("/p"), [Path("/p/engine.py"), Path("/p/train.py")])
    engine = Summary(exports={name: _fn(f"engine.py::{name}") for name in ("step", "log")})

    def program(*stepped: str) -> Program:
        calls = [Call(f"engine.{n}", None, (), per_step=True, gpu=True, where="t") for n in stepped]
        return Program(layout, {"engine.py": engine, "train.py": Summary(calls=calls)})

    env = program("step").environment("engine.py")
    assert env.stepped("step") == "t" and env.stepped("log") is None and env.any_stepped()
    asked = {Question("stepped", "step"): "t", Question("any stepped"): True}
    assert program("step", "log").environment("engine.py").holds(asked)
    assert not program("log").environment("engine.py").holds(asked)


def test_a_method_called_on_an_instance_of_a_class_of_another_file_is_linked(
    tmp_path: Path,
):
    """`ema.update(model)` on an instance of a class of utils/ema.py that tells nothing
    (no network, sync or step): the call is kept by the method's qualified name, the
    instance read through its bindings (a call of the class, or None: `... if rank == 0
    else None`, `self.ema = None` until built), and linking finds the method. A name
    bound to something else too, or a class of the file itself, is not such a call."""
    from torchlint.lint.linter import Linter
    from torchlint.settings import Settings

    ema = (
        "class ModelEMA:\n    def __init__(self, model):\n        self.model = model\n\n"
        "    def update(self, model):\n        pass\n"
    )
    train = (
        "from utils.ema import ModelEMA\n\n\nclass Local:\n    def update(self, m):\n"
        "        pass\n\n\nclass Trainer:\n    def __init__(self, model):\n"
        "        self.ema = None\n        self.model = model\n\n"
        "    def fit(self, model):\n        self.ema = ModelEMA(model)\n"
        "        self.ema.update(model)\n\n\n"
        "def main(model, rank, other):\n"
        "    ema = ModelEMA(model) if rank == 0 else None\n    ema.update(model)\n"
        "    mixed = ModelEMA(model) if rank == 0 else other\n    mixed.update(model)\n"
        "    local = Local()\n    local.update(model)\n"
    )
    layout = _layout(tmp_path, {"utils/ema.py": ema, "train.py": train})
    summaries = {}
    for key, text in (("utils/ema.py", ema), ("train.py", train)):
        env = Program(layout, summaries).environment(key)
        summaries[key] = Linter([], Settings()).summarize(text, key, env)
    calls = [(c.callee, c.caller, c.offset) for c in summaries["train.py"].calls]
    assert ("utils.ema.ModelEMA.update", "Trainer.fit", 1) in calls
    assert ("utils.ema.ModelEMA.update", "main", 1) in calls
    assert sum(callee == "utils.ema.ModelEMA.update" for callee, _, _ in calls) == 2
    update = Program(layout, summaries).export("train.py", "utils.ema.ModelEMA.update")
    assert isinstance(update, Function) and update.ref == "utils/ema.py::ModelEMA.update"


def test_re_exports_and_star_imports():
    cls_module = Summary(exports={"step": _fn("a/impl.py::step", "opt", steps=True)})
    package = Summary(imports={"step": ".impl.step"}, public=("step",))
    user = Summary(stars=("a",))
    layout = Layout(Path("/p"), [Path("/p/a/__init__.py"), Path("/p/a/impl.py"), Path("/p/u.py")])
    program = Program(layout, {"a/impl.py": cls_module, "a/__init__.py": package, "u.py": user})
    assert program.export("u.py", "a.step") == cls_module.exports["step"]
    assert program.star("u.py", "a") == ("step",)
    assert program.export("u.py", "a/impl.py::step") == cls_module.exports["step"]


def test_answers_are_recorded_and_replayed():
    summary = Summary(exports={"make": _fn("m.py::make", returns=Value(optimizer=OPTIMIZER))})
    layout = Layout(Path("/p"), [Path("/p/m.py"), Path("/p/u.py")])
    program = Program(layout, {"m.py": summary, "u.py": Summary()})
    env = program.environment("u.py")
    assert isinstance(env.export("m.make"), Function)
    assert env.export("torch.optim.SGD") is None  # not a module of the project: not asked
    assert list(env.answers) == [Question("export", "m.make")]
    assert program.environment("u.py").holds(env.answers)
    changed = Program(layout, {"m.py": Summary(), "u.py": Summary()})
    assert not changed.environment("u.py").holds(env.answers)
    assert Environment().export("m.make") is None and Environment().answers == {}


def test_a_summary_names_what_a_function_makes_of_its_parameter():
    """`shard` returns a loader made of the one it is given: its summary names the
    parameter, not the loaders the project passes (it is the same whatever they are, so
    the files importing it are not analysed again when they change). `reload` binds the
    parameter's name to what it reads from disk: what it returns is not its argument."""
    from torchlint.lint.linter import Linter
    from torchlint.settings import Settings

    source = (FIXTURES / "project" / "returned_parameter" / "helpers.py").read_text()
    source += "\n\ndef reload(loader):\n    loader = torch.load('loader.pt')\n    return loader\n"

    class Passing(Environment):
        linked = True  # type: ignore[assignment]

        def _parameter(self, function: str, name: str) -> Value | None:
            return Value(loaders=frozenset({"train.py#0"})) if name == "loader" else None

    returns = []
    for env in (Environment(path="helpers.py"), Passing(path="helpers.py")):
        summary = Linter([], Settings()).summarize(source, "helpers.py", env)
        shard = summary.exports["shard"]
        assert isinstance(shard, Function)
        returns.append(shard.returns)
        reload = summary.exports["reload"]  # not its argument given back
        assert isinstance(reload, Function) and not (reload.returns and reload.returns.params)
    assert returns == [Value(params=frozenset({"helpers.py::shard:loader"}))] * 2


def test_summaries_round_trip_through_json(tmp_path: Path, monkeypatch):
    """What the cache stores is what linking reads."""
    root = tmp_path / "loss_scaler"
    shutil.copytree(FIXTURES / "project" / "loss_scaler", root)
    monkeypatch.chdir(root)
    config = load_config(root / "pyproject.toml")
    results = run(plan_of(config), _files(root), bases=dict.fromkeys(_files(root), root)).results
    assert all(r.summary is not None for r in results if r.path != "util/__init__.py")
    for result in results:
        if result.summary is None:
            continue
        data = json.loads(json.dumps(result.summary))
        assert Summary.from_json(data).to_json() == data


MODELS = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
"""
TRAIN = """\
import torch
from torch.utils.data import DataLoader

from models import Net

model = Net().cuda()
model.eval()
for x in DataLoader(torch.randn(64, 4), batch_size=8):
    print(model(x.cuda()))
"""


def test_a_project_file_is_read_once_another_needs_it(tmp_path: Path, monkeypatch):
    """models.py holds no token of any rule, but train.py builds its network: it is read
    for its summary, and the eval loop over it is reported."""
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    assert _check(tmp_path, [tmp_path / "train.py"]) == {("train.py", 8, "TL404")}


def test_what_is_read_for_another_file_is_stored_and_kept(tmp_path: Path, monkeypatch):
    """models.py (no rule reads it) is read once for train.py's sake: the summary cache
    keeps it, and a run with nothing changed reads no file again, whether models.py is
    asked too or not."""
    from torchlint.lint.summary import SummaryReader

    reads: list[str] = []
    real = SummaryReader.__call__

    def counted(self, key: str):
        found = real(self, key)
        if key not in self.summarized:
            reads.append(key)
        return found

    monkeypatch.setattr(SummaryReader, "__call__", counted)
    monkeypatch.setenv("TORCHLINT_WORKERS", "1")  # the reads happen in this process
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache"
    everything = [tmp_path / "models.py", tmp_path / "train.py"]
    for files in (everything, everything, [tmp_path / "train.py"]):
        assert _check(tmp_path, files, cache) == {("train.py", 8, "TL404")}
    assert reads == ["models.py"]


LOADERS = """\
from torch.utils.data import DataLoader


def make_loader(dataset):
    return DataLoader(dataset, batch_size=64, shuffle=True)
"""
LOOP = """\
import torch

from {module} import make_loader

model = torch.nn.Linear(4, 2).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in make_loader(torch.utils.data.TensorDataset(torch.randn(64, 4))):
        loss = model(x.cuda()).sum()
        loss.backward()
        optimizer.step()
"""


def _summarized_files(monkeypatch) -> list[str]:
    """The names of the files a run (in this process) reads for their summaries only,
    in the order it reads them."""
    import torchlint.run.pool as pool

    summarized: list[str] = []
    real = pool.summarize_file
    monkeypatch.setattr(
        pool, "summarize_file", lambda path, *a: summarized.append(path.name) or real(path, *a)
    )
    monkeypatch.setenv("TORCHLINT_WORKERS", "1")
    return summarized


def test_a_run_of_some_files_reads_only_the_files_that_can_tell_them_something(
    tmp_path: Path, monkeypatch
):
    """A hook's run of data_a.py reads train_a.py (it imports data_a.py: its loop tells
    the loader feeds a GPU), not the two files of another part of the project that
    never import it; the finding is the whole project's."""
    summarized = _summarized_files(monkeypatch)
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    for part in ("a", "b"):
        (tmp_path / f"data_{part}.py").write_text(LOADERS)
        (tmp_path / f"train_{part}.py").write_text(LOOP.format(module=f"data_{part}"))
    monkeypatch.chdir(tmp_path)
    alone = _check(tmp_path, [tmp_path / "data_a.py"])
    assert summarized == ["train_a.py"]
    assert ("data_a.py", 5, "TL201") in alone
    whole = _check(tmp_path, sorted(tmp_path.glob("*.py")))
    assert alone == {f for f in whole if f[0] == "data_a.py"}


def test_a_package_that_re_exports_a_file_of_the_run_is_not_read_through(
    tmp_path: Path, monkeypatch
):
    """pkg/__init__.py re-exports data.py's helper and everything else of the package:
    a run of pkg/data.py reads train.py (its loop, through the re-export), not the
    package's other files, which tell data.py nothing."""
    summarized = _summarized_files(monkeypatch)
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from .data import make_loader\nfrom .other import other_loader\n"
    )
    (package / "data.py").write_text(LOADERS)
    (package / "other.py").write_text(LOADERS.replace("make_loader", "other_loader"))
    (tmp_path / "train.py").write_text(LOOP.format(module="pkg"))
    monkeypatch.chdir(tmp_path)
    alone = _check(tmp_path, [package / "data.py"])
    assert "other.py" not in summarized and "train.py" in summarized, summarized
    assert ("pkg/data.py", 5, "TL201") in alone


def test_files_of_an_import_cycle_are_analysed_one_after_another():
    """Inside a cycle, all imports but the one closing it are known when the importer is
    analysed; the order depends on the graph only."""
    from torchlint.project.layout import levels

    graph = {"a.py": {"b.py"}, "b.py": {"c.py"}, "c.py": {"a.py"}, "d.py": {"a.py"}}
    found = levels(graph)
    assert found == levels(dict(reversed(graph.items())))
    assert len({found["a.py"], found["b.py"], found["c.py"]}) == 3
    assert found["d.py"] > max(found["a.py"], found["b.py"], found["c.py"])
    assert levels({"x.py": set(), "y.py": {"x.py", "outside.py"}}) == {"x.py": 0, "y.py": 1}


def test_an_import_in_a_function_orders_the_files_but_inside_a_cycle():
    """`megatron.py` imports the loader module in a function (the loader module imports
    it, through the package, at the top): inside that cycle the nested import gives way;
    outside any cycle (`cli.py` importing the loop in `main()`), it counts."""
    from torchlint.project.layout import levels

    graph = {"loader.py": {"megatron.py"}, "megatron.py": set(), "loop.py": set(), "cli.py": set()}
    nested = {"megatron.py": {"loader.py"}, "cli.py": {"loop.py"}}
    found = levels(graph, nested)
    assert found["loader.py"] > found["megatron.py"]
    assert found["cli.py"] > found["loop.py"]
    both = {"a.py": {"b.py"}, "b.py": {"a.py"}}  # a cycle of nested imports only
    assert levels({"a.py": set(), "b.py": set()}, both) == {"a.py": 0, "b.py": 0}


def test_a_value_is_something_when_any_of_its_facts_is():
    """An empty Value says nothing (a describe() that found nothing); each fact alone is
    something, so a new field must be added to `Value.__bool__`."""
    from dataclasses import fields

    from torchlint.semantic.external import Network
    from torchlint.semantic.lattice import ModelKind

    assert not Value()
    samples = {
        "device": CUDA,
        "network": Network(ModelKind.NETWORK),
        "optimizer": OPTIMIZER,
        "instance": "m.py::C",
    }
    for f in fields(Value):
        sample = samples.get(f.name, frozenset({"m.py#0"}))
        assert Value(**{f.name: sample}), f.name


def test_a_run_over_the_bytes_of_a_fixed_point_reads_nothing_again(tmp_path: Path, monkeypatch):
    """Once a run has reached a fixed point, a run over the same bytes trusts what it
    stored: no file is analysed, and no stored summary is read (a cached result stands
    where its answers are those of the fixed point, else they are asked again). With
    other rules selected (results not cached), the findings are those of a run without
    a cache."""
    import torchlint.run.cache as store
    import torchlint.run.pool as pool

    root = tmp_path / "engine_layout"
    shutil.copytree(FIXTURES / "project" / "engine_layout", root)
    monkeypatch.chdir(root)
    monkeypatch.setenv("TORCHLINT_WORKERS", "1")
    cache = tmp_path / "cache"
    first = _check(root, _files(root), cache)
    assert ("mypkg/engine.py", 12, "TL401") in first
    work: list[str] = []
    for name, owner in (("process_file", pool), ("get", store.Summaries)):
        real = getattr(owner, name)
        monkeypatch.setattr(
            owner, name, lambda *a, _r=real, _n=name, **k: work.append(_n) or _r(*a, **k)
        )
    assert _check(root, _files(root), cache) == first
    assert work == [], work
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace("[tool.torchlint]", '[tool.torchlint]\nignore = ["TL202"]')
    )
    found = _check(root, _files(root), cache)
    assert "process_file" in work
    assert found == _check(root, _files(root)) == {f for f in first if f[2] != "TL202"}


def test_a_file_asked_after_an_edit_that_tells_what_it_told_reads_nothing_stored(
    tmp_path: Path, monkeypatch
):
    """A hook asks about an edited file (a comment) that the project does not reach:
    its summary is the one the fixed point has, so its result needs neither the other
    files' stored summaries nor the linked program (what the fixed point stored for the
    file's old bytes is read, once), and is that of a run without a cache."""
    import torchlint.run.cache as store

    root = tmp_path / "engine_layout"
    shutil.copytree(FIXTURES / "project" / "engine_layout", root)
    monkeypatch.chdir(root)
    monkeypatch.setenv("TORCHLINT_WORKERS", "1")
    cache = tmp_path / "cache"
    models = root / "mypkg" / "models.py"
    _check(root, _files(root), cache)
    models.write_text(models.read_text() + "# a comment\n")
    reads: list[str] = []
    real = store.Summaries.get
    monkeypatch.setattr(store.Summaries, "get", lambda *a: reads.append(a[2]) or real(*a))
    assert _check(root, [models], cache) == set()
    assert reads == ["mypkg/models.py"], reads
    monkeypatch.undo()
    assert _check(root, [models]) == set()


def test_a_file_asked_after_an_edit_is_checked_against_the_last_fixed_point(
    tmp_path: Path, monkeypatch
):
    """The file a hook asks about changed since the last fixed point: what it tells the
    project now is compared with what it told then. The same (a comment): nothing else
    is asked again; different (training moved to the CPU): every answer is checked, and
    the findings are those of a run without a cache, in the file asked and the others."""
    root = tmp_path / "engine_layout"
    shutil.copytree(FIXTURES / "project" / "engine_layout", root)
    monkeypatch.chdir(root)
    cache = tmp_path / "cache"
    engine, train = root / "mypkg" / "engine.py", root / "train.py"
    _check(root, _files(root), cache)
    engine.write_text(engine.read_text() + "# a comment\n")
    assert _check(root, [engine], cache) == _check(root, [engine])
    assert ("mypkg/engine.py", 12, "TL401") in _check(root, [engine], cache)
    train.write_text(
        train.read_text().replace('"cuda" if torch.cuda.is_available() else "cpu"', '"cpu"')
    )
    assert _check(root, [train], cache) == _check(root, [train])
    assert _check(root, [engine], cache) == _check(root, [engine])
    assert ("mypkg/engine.py", 12, "TL401") not in _check(root, [engine], cache)


def test_cached_results_leave_summaries_to_the_store(tmp_path: Path, monkeypatch):
    """A cached result holds neither summary nor answers (the store keeps them, once):
    where the project needs them (a file elsewhere changed), they are read from the
    store, checked against the digest of the answers the result was computed with;
    where the store lost them, the file is analysed again. Either way, the findings are
    those of a run without a cache."""
    import torchlint.run.pool as pool
    from torchlint.run.cache import FORMAT

    root = tmp_path / "engine_layout"
    shutil.copytree(FIXTURES / "project" / "engine_layout", root)
    monkeypatch.chdir(root)
    monkeypatch.setenv("TORCHLINT_WORKERS", "1")
    cache, files, train = tmp_path / "cache", _files(root), root / "train.py"
    _check(root, files, cache)
    entries = [json.loads(p.read_text())["result"] for p in (cache / f"v{FORMAT}").rglob("*")
               if p.is_file()]  # fmt: skip
    assert len(entries) == len(files)
    assert all(e["summary"] is None for e in entries)
    assert all(e["answers"] is None for e in entries if e["stored"])
    assert [e for e in entries if e["stored"]]
    linted: list[str] = []
    for name in ("process_file", "summarize_file"):  # analysed for findings, or for its summary
        real = getattr(pool, name)
        monkeypatch.setattr(
            pool, name, lambda p, *a, real=real: linted.append(p.name) or real(p, *a)
        )
    for edit in ("cpu", "store lost"):
        if edit == "cpu":
            text = train.read_text()
            train.write_text(
                text.replace('"cuda" if torch.cuda.is_available() else "cpu"', '"cpu"')
            )
        else:
            train.write_text(train.read_text() + "# edited\n")
            shutil.rmtree(cache / f"project-v{FORMAT}")
        linted.clear()
        found = _check(root, files, cache)
        assert ("export_onnx.py" in linted) == (edit == "store lost"), linted
        assert found == _check(root, files)


def test_a_warm_run_reads_no_file_whose_stamp_is_unchanged(tmp_path: Path, monkeypatch):
    """A file whose stamp (mtime, size, inode) is what the project's scan read is known
    by the digest the scan took: a warm run without findings there reads none of its
    bytes; a file edited since is read, and its new bytes miss the cache."""
    import torchlint.run.rounds as rounds

    root = tmp_path / "engine_layout"
    shutil.copytree(FIXTURES / "project" / "engine_layout", root)
    monkeypatch.chdir(root)
    monkeypatch.setenv("TORCHLINT_WORKERS", "1")
    cache, files = tmp_path / "cache", _files(root)
    first = _check(root, files, cache)
    read: list[str] = []
    real = rounds.read_bytes
    monkeypatch.setattr(rounds, "read_bytes", lambda p: read.append(p.name) or real(p))
    assert _check(root, files, cache) == first
    assert read == []
    models = root / "mypkg" / "models.py"
    models.write_text(models.read_text() + "# edited\n")
    assert _check(root, files, cache) == first
    assert read.count("models.py") >= 1 and "engine.py" not in read


def test_a_near_miss_across_files_is_reported_alone(tmp_path: Path, monkeypatch):
    """Checked alone, the notebook cannot see that the helper saves `best.pt`: both of
    its loads are reported; its project rules one out."""
    shape = FIXTURES / "project" / "saved_by_helper"
    shutil.copyfile(shape / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copyfile(shape / "notebooks" / "run.ipynb", tmp_path / "run.ipynb")
    monkeypatch.chdir(tmp_path)
    found = _check(tmp_path, [tmp_path / "run.ipynb"])
    assert found == {("run.ipynb:cell 3", 1, "TL106"), ("run.ipynb:cell 3", 2, "TL106")}


def test_add_noqa_adds_what_check_reports_across_files(tmp_path: Path):
    """`--add-noqa` comments the findings `check` reports, those that depend on other
    files of the project included (and the notebook's), and nothing `check` hides: after
    it, `check` passes."""
    from .conftest import run_cli

    root = tmp_path / "newcomer"
    shutil.copytree(FIXTURES / "project" / "newcomer", root)
    assert run_cli("check", "--no-cache", ".", cwd=root).returncode == 1
    added = run_cli("check", "--no-cache", "--add-noqa", ".", cwd=root)
    assert added.returncode == 0, added.stderr
    assert "added 6 noqa directives" in added.stderr
    data = (root / "pkg" / "data.py").read_text(encoding="utf-8")
    assert data.count("# noqa: TL201\n") == 1  # TL202 there is of low impact: hidden
    assert "# noqa: TL404" in (root / "explore.ipynb").read_text(encoding="utf-8")
    assert "# noqa: TL501" in (root / "pkg" / "engine.py").read_text(encoding="utf-8")
    assert run_cli("check", "--no-cache", ".", cwd=root).returncode == 0


def test_a_file_adding_to_sys_path_imports_from_there(tmp_path: Path):
    """`sys.path.insert(0, "..")` in a notebook of a subfolder: its imports resolve from
    the folder above, as Python finds them; a folder above the root stays outside."""
    from torchlint.project.layout import sys_paths

    for key in ("lib/helper.py", "lib/nb/run.py", "lib/nb/x.py"):
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_text("")
    layout = Layout(tmp_path, list(tmp_path.rglob("*.py")))
    assert layout.resolve("lib/nb/run.py", "helper.train") is None
    text = 'import sys\nsys.path.insert(0, "..")\nsys.path.append("/usr/lib")\n'
    assert sys_paths(text) == [".."]
    layout.add_paths("lib/nb/run.py", sys_paths(text))
    assert layout.resolve("lib/nb/run.py", "helper.train") == ("lib/helper.py", ("train",))
    layout.add_paths("lib/nb/x.py", ["../../.."])  # above the root: outside the project
    assert layout.resolve("lib/nb/x.py", "helper.train") is None


def test_a_file_named_below_the_working_folder_is_read_with_its_project(tmp_path, monkeypatch):
    """No marker anywhere: `torchlint check scripts/train.py` at the top of a checkout reads
    the file with the folder it is run from as its project, where `utils/` is found (its
    own folder, `scripts/`, holds no `utils`)."""
    from .conftest import run_cli

    shutil.copytree(FIXTURES / "project" / "ddp_helper" / "utils", tmp_path / "utils")
    (tmp_path / "scripts").mkdir()
    shutil.copy(FIXTURES / "project" / "ddp_helper" / "train.py", tmp_path / "scripts")
    args = ("check", "--no-cache", "--select", "TL305")
    found = run_cli(*args, "scripts/train.py", cwd=tmp_path)
    assert "TL305" in found.stdout, found.stdout + found.stderr
    alone = run_cli(*args, "train.py", cwd=tmp_path / "scripts")
    assert "TL305" not in alone.stdout  # from inside scripts/, utils/ is not below
