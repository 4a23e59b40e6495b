"""Project knowledge (`[tool.torchlint.semantic]`): callables the analysis cannot see,
named in the config, are facts every rule reads; a malformed table is a config error.
Each key is shown making a rule speak through the command line, in a temporary project,
and silent without it."""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst
import pytest

from torchlint.config.load import load_config
from torchlint.semantic import build
from torchlint.settings import Knowledge, LoaderFactory, StepFunction

from .conftest import ROOT, run_cli, run_cli_process

# A GPU training loop that runs backward and the optimizer step through a helper of a
# library outside the project, and prints the loss on every step (TL401).
STEPPED = """\
import torch
from {module} import backward_and_step as bs

model = torch.nn.Linear(1024, 1024).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(range(10), batch_size=256, pin_memory=True)
for x in loader:
    loss = model(x.cuda(non_blocking=True)).sum()
    print(loss.item())
    bs(loss, opt)
"""
STEP_FUNCTIONS = '[tool.torchlint.semantic]\nstep-functions = ["mylib.train.backward_and_step"]\n'


def _project(root: Path, config: str, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text(config or "[tool.torchlint]\n", encoding="utf-8")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


# Rules that speak in almost any float32 GPU loop of these snippets (mixed precision,
# cuDNN's autotuner): not what the keys here are about.
BACKGROUND = ("TL501", "TL601")


def _codes(output: str) -> list[tuple[str, int, str]]:
    """(file, line, code) of each finding printed, `BACKGROUND` rules aside."""
    found = re.finditer(r"^(?P<file>\S+\.py):(?P<line>\d+):\d+: (?P<code>TL\d+)", output, re.M)
    return [(m["file"], int(m["line"]), m["code"]) for m in found if m["code"] not in BACKGROUND]


@pytest.mark.parametrize(
    ("module", "config", "expected"),
    [
        ("mylib.train", STEP_FUNCTIONS, [("train.py", 9, "TL401")]),
        ("mylib.train", "", []),  # without the key: no training loop
        ("otherlib.train", STEP_FUNCTIONS, []),  # the same short name from another module
    ],
)
def test_a_loop_stepping_through_a_named_helper_is_a_training_loop(
    tmp_path, module, config, expected
):
    _project(tmp_path, config, {"train.py": STEPPED.format(module=module)})
    result = run_cli_process("check", "--no-cache", ".", cwd=tmp_path)
    assert _codes(result.stdout) == expected, result.stdout + result.stderr
    assert result.returncode == (1 if expected else 0)


def test_names_match_through_any_import(tmp_path):
    text = STEPPED.replace(
        "from {module} import backward_and_step as bs", "import mylib.train as T"
    )
    _project(tmp_path, STEP_FUNCTIONS, {"train.py": text.replace("bs(", "T.backward_and_step(")})
    result = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    assert _codes(result.stdout) == [("train.py", 9, "TL401")]


def test_a_file_calling_a_named_helper_is_checked_without_the_rules_tokens(tmp_path):
    """TL401 looks at files that say `backward`: one that steps only through a helper
    named otherwise is checked too when the helper is named (read from stdin: a file
    alone, whose rules are chosen by their tokens)."""
    text = STEPPED.format(module="mylib.train").replace("backward_and_step", "apply_update")
    for config, expected in (
        ("", []),
        (STEP_FUNCTIONS.replace("backward_and_step", "apply_update"), [("train.py", 9, "TL401")]),
    ):
        _project(tmp_path, config, {})
        result = run_cli("check", "--stdin-filename", "train.py", "-", input=text, cwd=tmp_path)
        assert _codes(result.stdout) == expected


def test_the_project_layer_carries_what_a_factory_returns_to_another_file(tmp_path):
    """A pinned loader a factory returns in one file, iterated by a function of another
    file that copies its batches synchronously (TL105 there), run after run (cached)."""
    engine = (
        "def train(model, loader, opt):\n"
        "    for x in loader:\n"
        "        model(x.cuda()).sum().backward()\n"
        "        opt.step()\n"
    )
    main = (
        "import torch\nfrom mylib.data import build_loader\nfrom engine import train\n\n"
        "model = torch.nn.Linear(1024, 1024).cuda()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "train(model, build_loader(range(10), pin=True), opt)\n"
    )
    config = (
        "[tool.torchlint.semantic]\n"
        'loader-factories = [{ name = "mylib.data.build_loader", pin-memory = "pin" }]\n'
    )
    _project(tmp_path, config, {"engine.py": engine, "main.py": main})
    for _ in range(2):
        assert _codes(run_cli("check", ".", cwd=tmp_path).stdout) == [("engine.py", 3, "TL105")]
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    assert _codes(run_cli("check", ".", cwd=tmp_path).stdout) == []


# One program per key, with the finding the key makes (TL404, TL202, TL105).
MODEL = """\
import torch
from torch.utils.data import DataLoader
from mylib.models import build_model

model = build_model("resnet").cuda()
val_loader = DataLoader(range(10), batch_size=256)
model.eval()
correct = 0
for x in val_loader:
    correct += model(x.cuda()).argmax(1).sum()
"""
DEVICE = """\
import torch
from mylib.utils import get_device

device = get_device()
model = torch.nn.Linear(1024, 1024).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(range(10), batch_size=256)
for x in loader:
    model(x.to(device)).sum().backward()
    opt.step()
"""
LOADER = """\
import torch
from mylib.data import build_loader

model = torch.nn.Linear(1024, 1024).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in build_loader(range(10), pin={pin}):
    model(x.cuda()).sum().backward()
    opt.step()
"""


@pytest.mark.parametrize(
    ("entry", "text", "expected"),
    [
        ('model-factories = ["mylib.models.build_model"]', MODEL, ("train.py", 9, "TL404")),
        ('device-functions = ["mylib.utils.get_device"]', DEVICE, ("train.py", 7, "TL202")),
        (
            'loader-factories = [{ name = "mylib.data.build_loader", pin-memory = "pin" }]',
            LOADER.format(pin="True"),
            ("train.py", 7, "TL105"),
        ),
        (
            'loader-factories = [{ name = "mylib.data.build_loader", pin-memory = 1 }]',
            LOADER.format(pin="torch.cuda.is_available()").replace("pin=", ""),
            ("train.py", 7, "TL105"),
        ),
    ],
)
def test_each_key_makes_a_rule_speak(tmp_path, entry, text, expected):
    _project(tmp_path, "", {"train.py": text})
    assert _codes(run_cli("check", "--no-cache", ".", cwd=tmp_path).stdout) == []
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchlint.semantic]\n{entry}\n")
    assert _codes(run_cli("check", "--no-cache", ".", cwd=tmp_path).stdout) == [expected]


def test_a_factory_loader_that_does_not_pin_is_not_pinned(tmp_path):
    """`pin=False`: its copies are not worth making non-blocking (no TL105); the call is
    what to change (TL202, fixed through the factory's own `pin`)."""
    config = (
        "[tool.torchlint.semantic]\n"
        'loader-factories = [{ name = "mylib.data.build_loader", pin-memory = "pin" }]\n'
    )
    _project(tmp_path, config, {"train.py": LOADER.format(pin="False")})
    result = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    assert _codes(result.stdout) == [("train.py", 6, "TL202")]
    assert "`pin=False` on a training DataLoader" in result.stdout
    assert "help: Set `pin=torch.cuda.is_available()`" in result.stdout


# A GPU training program (under the main guard, so workers can start) over the loaders
# of factories of a library outside the project.
FACTORY = """\
import torch
from mylib.data import build_loader


def main():
    model = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in build_loader(range(10), {args}):
        model(x.cuda()).sum().backward()
        opt.step()


if __name__ == "__main__":
    main()
"""
FACTORIES = "[tool.torchlint]\npreview = true\n[tool.torchlint.semantic]\nloader-factories = [{}]\n"
BUILD = 'name = "mylib.data.build_loader"'


@pytest.mark.parametrize(
    ("entry", "args", "expected"),
    [
        # batch size: by keyword, by position; a large one, or the factory's default
        (f'{{ {BUILD}, batch-size = "bs" }}', "bs=8", ["TL001"]),
        (f"{{ {BUILD}, batch-size = 1 }}", "8", ["TL001"]),
        (f'{{ {BUILD}, batch-size = "bs" }}', "bs=256", []),
        (f'{{ {BUILD}, batch-size = "bs" }}', "", []),
        (f'{{ {BUILD}, workers = "workers" }}', "bs=8", []),  # no `batch-size`: not seen
        ('"mylib.data.build_loader"', "bs=8", []),  # a name alone: nothing seen
        # workers: no workers passed; the factory's default, or no `workers` key
        (f'{{ {BUILD}, workers = "workers" }}', "workers=0", ["TL201"]),
        (f"{{ {BUILD}, workers = 1 }}", "0", ["TL201"]),
        (f'{{ {BUILD}, workers = "workers" }}', "workers=4", []),
        (f'{{ {BUILD}, workers = "workers" }}', "", []),
        (f'{{ {BUILD}, batch-size = "bs" }}', "workers=0", []),
    ],
)
def test_factories_say_which_arguments_carry_batch_size_and_workers(
    tmp_path, entry, args, expected
):
    _project(tmp_path, FACTORIES.format(entry), {"train.py": FACTORY.format(args=args)})
    found = run_cli("check", "--no-cache", "--select", "TL001,TL201", ".", cwd=tmp_path)
    assert [c for _, _, c in _codes(found.stdout)] == expected, found.stdout + found.stderr


@pytest.mark.parametrize(
    ("entry", "args", "fixed"),
    [
        (
            f'{{ {BUILD}, batch-size = "bs", workers = "workers" }}',
            "bs=8, workers=0",
            "build_loader(range(10), bs=32, workers=NUM_WORKERS)",
        ),
        (
            f"{{ {BUILD}, batch-size = 1, workers = 2 }}",
            "8, 0",
            "build_loader(range(10), 32, NUM_WORKERS)",
        ),
    ],
)
def test_fixes_on_a_factory_call_write_the_factorys_parameters(tmp_path, entry, args, fixed):
    """The workers fix sets the factory's own parameter, nothing the factory may not take
    (no `persistent_workers`, no `pin_memory`, though the loader is iterated each epoch)."""
    text = FACTORY.format(args=args).replace("    for x", "    for epoch in range(3):\n     for x")
    _project(tmp_path, FACTORIES.format(entry), {"train.py": text})
    run_cli("check", "--fix", "--unsafe-fixes", "--select", "TL001,TL201", ".", cwd=tmp_path)
    after = (tmp_path / "train.py").read_text(encoding="utf-8")
    assert f"in {fixed}:" in after and "persistent" not in after and "pin" not in after


def test_a_factory_loader_another_file_trains_on_is_read_where_it_is_built(tmp_path):
    engine = (
        "def train(model, loader, opt):\n    for x in loader:\n"
        "        model(x.cuda()).sum().backward()\n        opt.step()\n"
    )
    main = (
        "import torch\nfrom mylib.data import build_loader\nfrom engine import train\n\n"
        "model = torch.nn.Linear(1024, 1024).cuda()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "train(model, build_loader(range(10), bs=8), opt)\n"
    )
    config = FACTORIES.format(f'{{ {BUILD}, batch-size = "bs" }}')
    _project(tmp_path, config, {"engine.py": engine, "main.py": main})
    for _ in range(2):  # the second run from the cache
        assert _codes(run_cli("check", ".", cwd=tmp_path).stdout) == [("main.py", 7, "TL001")]


def test_results_and_summaries_are_cached_per_knowledge(tmp_path):
    """The cache keys on the knowledge: a file's result, and the summary of a project
    file whose function steps through the helper, are not reused after the table
    changes."""
    engine = (
        "from mylib.train import backward_and_step\n\n\n"
        "def train_step(loss, opt):\n    backward_and_step(loss, opt)\n"
    )
    train = STEPPED.format(module="engine").replace("backward_and_step as bs", "train_step as bs")
    _project(tmp_path, "", {"engine.py": engine, "train.py": train})
    for config, expected in (("", []), (STEP_FUNCTIONS, [("train.py", 9, "TL401")]), ("", [])):
        (tmp_path / "pyproject.toml").write_text(config or "[tool.torchlint]\n")
        assert _codes(run_cli("check", ".", cwd=tmp_path).stdout) == expected, config


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('semantic = ["x"]', "`semantic` must be a table"),
        (
            "semantic = { step-function = [] }",
            "unknown key `semantic.step-function` (did you mean `semantic.step-functions`?)",
        ),
        ('semantic = { step-functions = "a.b" }', "`semantic.step-functions` must be a list"),
        (
            'semantic = { model-factories = ["build_model"] }',
            '`semantic.model-factories`: "build_model" is not a qualified name',
        ),
        ('semantic = { model-factories = ["a.1b"] }', '"a.1b" is not a qualified name'),
        (
            "semantic = { model-factories = [3] }",
            "an entry must be a qualified name or a table, got 3",
        ),
        ('semantic = { step-functions = [{ optimizer = "opt" }] }', "a table entry needs `name`"),
        (
            'semantic = { step-functions = [{ name = "a.b", optimiser = "opt" }] }',
            "`semantic.step-functions`: unknown key `optimiser` in the entry for `a.b` "
            "(did you mean `optimizer`?)",
        ),
        (
            'semantic = { step-functions = [{ name = "a.b", backward = "yes" }] }',
            "`backward` of `a.b` must be true or false",
        ),
        (
            'semantic = { step-functions = [{ name = "a.b", optimizer = "the opt" }] }',
            "`optimizer` of `a.b` must name a parameter",
        ),
        (
            'semantic = { loader-factories = [{ name = "a.b", pin-memory = -1 }] }',
            "`pin-memory` of `a.b` must name a parameter",
        ),
        (
            'semantic = { loader-factories = [{ name = "a.b", workers = "num workers" }] }',
            "`workers` of `a.b` must name a parameter",
        ),
        (
            'semantic = { loader-factories = [{ name = "a.b", batch_size = "bs" }] }',
            "unknown key `batch_size` in the entry for `a.b` (did you mean `batch-size`?)",
        ),
        (
            'semantic = { model-factories = [{ name = "a.b", pin-memory = "pin" }] }',
            "unknown key `pin-memory` in the entry for `a.b`",
        ),
        (
            'semantic = { step-functions = [{ name = "a.b", backward = false, step = false }] }',
            "`a.b` runs neither a backward pass nor a step",
        ),
        (
            'semantic = { model-factories = ["a.b"], device-functions = ["a.b"] }',
            "`a.b` is named twice",
        ),
        (
            'semantic = { step-functions = ["mylib.train.backward_and_stpe"] }',
            "`semantic.step-functions`: `mylib.train.backward_and_stpe` resolves to nothing: "
            "mylib/train.py defines no `backward_and_stpe`",
        ),
        (
            'semantic = { model-factories = ["pkg.Models.build"] }',
            "`pkg.Models.build` resolves to nothing: src/pkg/__init__.py defines no `Models.build`",
        ),
    ],
)
def test_a_malformed_table_is_a_config_error_naming_the_key(tmp_path, table, message):
    files = {
        "mylib/train.py": "def backward_and_step(loss, opt):\n    pass\n",
        "src/pkg/__init__.py": "class Models:\n    def make(self):\n        pass\n",
    }
    _project(tmp_path, f"[tool.torchlint]\n{table}\n", files)
    result = run_cli("check", ".", cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and "pyproject.toml" in result.stderr, result.stderr


def test_names_of_the_project_are_checked_and_others_taken_as_written(tmp_path):
    files = {
        "mylib/train.py": "from .core import *\n\ndef backward_and_step(loss, opt):\n    pass\n",
        "src/pkg/__init__.py": "class Models:\n    def make(self):\n        pass\n",
        "mylib/core.py": "",
    }
    table = (
        '[tool.torchlint.semantic]\nstep-functions = ["mylib.train.backward_and_step", '
        '"mylib.train.from_the_star_import", "thirdparty.train.step"]\n'
        'model-factories = ["pkg.Models.make"]\n'
    )
    _project(tmp_path, table, files)
    config = load_config(tmp_path / "pyproject.toml")
    assert config.knowledge.model_factories == ("pkg.Models.make",)
    assert [s.name for s in config.knowledge.step_functions] == [
        "mylib.train.backward_and_step",
        "mylib.train.from_the_star_import",
        "thirdparty.train.step",
    ]


@pytest.mark.parametrize(
    ("table", "shown"),
    [
        (  # step functions, by name or with their arguments; the keys not set are shown
            'step-functions = ["a.step", { name = "a.clip", backward = false, optimizer = 1 }]',
            [
                'semantic.step-functions = ["a.step", { "name" = "a.clip", "backward" = false, '
                '"optimizer" = 1 }]',
                "semantic.model-factories = []",
            ],
        ),
        (  # the parameters a loader factory names
            'loader-factories = ["a.make", { name = "a.build", batch-size = 1, workers = "nw" }]',
            [
                'semantic.loader-factories = ["a.make", { "name" = "a.build", "batch-size" = 1, '
                '"workers" = "nw" }]'
            ],
        ),
    ],
    ids=["step-functions", "loader-factories"],
)
def test_show_settings_prints_the_knowledge(tmp_path, table, shown):
    _project(tmp_path, f"[tool.torchlint.semantic]\n{table}\n", {"train.py": "import torch\n"})
    out = run_cli("check", "--show-settings", "train.py", cwd=tmp_path).stdout
    for line in shown:
        assert line in out


def test_the_optimizer_argument_names_what_a_step_function_steps():
    text = (
        "import torch\nfrom mylib.train import step\n"
        "opt = torch.optim.AdamW(params)\n"
        "step(loss, opt)\nstep(loss, optimizer=opt)\nstep(loss)\n"
    )
    settings = load_config(None).settings()
    for entry, stepped in ((1, [True, False, False]), ("optimizer", [False, True, False])):
        settings.knowledge = Knowledge(
            step_functions=(StepFunction("mylib.train.step", optimizer=entry),)
        )
        module = build(cst.parse_module(text), "train.py", settings)
        calls = module.calls_to("mylib.train.step")
        built = [module.training.stepped(c) for c in calls]
        assert [b is not None for b in built] == stepped
        assert all(module.resolve(b.func) == "torch.optim.AdamW" for b in built if b is not None)


def test_the_documented_snippets_load(tmp_path):
    """Each TOML snippet of the Project knowledge section of docs/extending.md is read
    by the real config and gives the knowledge it shows."""
    doc = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    section = doc.split("## Project knowledge", 1)[1].split("\n## ", 1)[0]
    snippets = re.findall(r"```toml\n(.*?)```", section, re.S)
    assert len(snippets) == 2
    for snippet in snippets:
        (tmp_path / "pyproject.toml").write_text(snippet, encoding="utf-8")
        knowledge = load_config(tmp_path / "pyproject.toml").knowledge
        assert knowledge.step_functions and knowledge.loader_factories
    assert knowledge.step_functions[1] == StepFunction(
        "mylib.train.clip_and_step", backward=False, optimizer="optimizer"
    )
    assert knowledge.loader_factories[0] == LoaderFactory(
        "mylib.data.build_loader", batch_size=1, workers="workers", pin_memory="pin"
    )
