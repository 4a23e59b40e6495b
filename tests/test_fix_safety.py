"""benchmarks/fix_safety.py's comparison of a file before and after `fix --unsafe-fixes`,
on small programs written here. No test reads ../shared: the benchmark itself runs on the
corpus (`python benchmarks/fix_safety.py`: no unsafe edit, cascade near 1)."""

from __future__ import annotations

import json
import textwrap

import pytest

from .conftest import benchmark

fs = benchmark("fix_safety")

HEAD = "import torch\nfrom torch.utils.data import DataLoader\n"


def kinds(before: str, after: str, notebook: bool = False) -> list[tuple[str, str]]:
    before, after = HEAD + textwrap.dedent(before), HEAD + textwrap.dedent(after)
    labels = [str(n) for n in range(1, before.count("\n") + 2)]
    found = fs.check(before, after, labels, "t.py", notebook)
    return [(v.kind, v.where) for v in found]


MODULE_LEVEL = """\
loader = DataLoader(ds, batch_size=8{})
for x in loader:
    pass
"""


def test_workers_added_at_module_level():
    before, after = MODULE_LEVEL.format(""), MODULE_LEVEL.format(", num_workers=2")
    assert kinds(before, after) == [("workers-unguarded", "t.py:3")]
    # An explicit num_workers=0 turned into workers is an addition too.
    assert kinds(MODULE_LEVEL.format(", num_workers=0"), after) == kinds(before, after)
    assert kinds(after, after) == []


FUNCTION = """\
def train():
    loader = DataLoader(ds, batch_size=8{})


def main():
    train()


{}
"""


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ('if __name__ == "__main__":\n    main()', []),
        ("main()", [("workers-unguarded", "t.py:4")]),
        ("", []),  # never called here: entered from another module
    ],
)
def test_workers_in_a_function_are_as_guarded_as_its_callers(entry, expected):
    before = FUNCTION.format("", entry)
    after = FUNCTION.format(", num_workers=2", entry)
    assert kinds(before, after) == expected


GUARDED_LOOP = """\
loader = DataLoader(ds, batch_size=8{})


def train():
    for x in loader:
        pass


if __name__ == "__main__":
    train()
"""


def test_workers_of_a_module_level_loader_iterated_only_under_the_guard():
    """The workers start where the loader is iterated: a spawned worker that runs the
    module again only builds it."""
    before, after = GUARDED_LOOP.format(""), GUARDED_LOOP.format(", num_workers=2")
    assert kinds(before, after) == []
    unguarded = after.replace('if __name__ == "__main__":\n    train()', "train()")
    assert kinds(before.replace('if __name__ == "__main__":\n    train()', "train()"), unguarded)


SPREAD = """\
def main():
    kwargs = {{"batch_size": 8}}
    extra = {{"num_workers": {}, "pin_memory": True}}
    kwargs.update(extra)
    return DataLoader(ds, **kwargs{})
"""


@pytest.mark.parametrize(
    ("workers", "expected"), [("2", []), ("0", ["persistent-without-workers"])]
)
def test_persistent_workers_where_a_spread_dict_holds_the_workers(workers, expected):
    before = SPREAD.format(workers, "")
    after = SPREAD.format(workers, ", persistent_workers=True")
    assert [k for k, _ in kinds(before, after)] == expected


@pytest.mark.parametrize(
    ("workers", "expected"),
    [
        ("os.cpu_count()", []),
        ("min(8, os.cpu_count())", []),
        ("len(os.sched_getaffinity(0))", []),
        ("os.cpu_count() // 2", ["persistent-without-workers"]),  # 0 on one CPU
    ],
)
def test_persistent_workers_beside_the_machines_cpu_count(workers, expected):
    """As many workers as CPUs is at least one wherever a DataLoader runs (Pytorch-UNet's
    `loader_args = dict(..., num_workers=os.cpu_count())`); half of them may be none."""
    code = (
        "import os\nargs = dict(batch_size=8, num_workers={})\nloader = DataLoader(ds, **args{})\n"
    )
    before, after = code.format(workers, ""), code.format(workers, ", persistent_workers=True")
    assert [k for k, _ in kinds(before, after)] == expected


def test_unpicklable_worker_functions():
    guarded = 'if __name__ == "__main__":\n    main()\n'
    code = """\
    def make_collate(pad):
        def collate(batch):
            return batch
        return collate


    def top_level(batch):
        return batch


    def main():
        collate = make_collate(0)
        a = DataLoader(ds, collate_fn=lambda b: b{0})
        b = DataLoader(ds, collate_fn=collate{0})
        c = DataLoader(ds, collate_fn=top_level{0})
    """
    before = textwrap.dedent(code).format("") + guarded
    after = textwrap.dedent(code).format(", num_workers=2") + guarded
    assert kinds(before, after) == [
        ("workers-unpicklable", "t.py:15"),
        ("workers-unpicklable", "t.py:16"),
    ]
    # In a notebook the top-level function cannot be unpickled either (no module to import).
    assert len(kinds(before, after, notebook=True)) == 3


def test_dataparallel_around_a_loss():
    before = "model = Net().cuda()\ncriterion = torch.nn.CrossEntropyLoss().cuda()\n"
    after = before + "model = torch.nn.DataParallel(model)\n"
    assert kinds(before, after) == []
    after += "criterion = torch.nn.DataParallel(criterion)\n"
    assert kinds(before, after) == [("dataparallel-loss", "t.py:4")]


def test_explicit_set_to_none_removed_or_changed():
    code = "for p, g in zip(params, grads):\n    p.grad = g\nopt.step()\nopt.zero_grad({})\n"
    before = code.format("set_to_none=False")
    assert kinds(before, code.format("")) == [("explicit-arg", "t.py:6")]
    assert kinds(before, code.format("set_to_none=True")) == [("explicit-arg", "t.py:6")]
    assert kinds(before, before) == []


def test_autocast_added_where_the_loss_is_a_bce_on_probabilities():
    loop = "criterion = torch.nn.BCELoss()\nfor x, y in loader:\n{}    loss = criterion(x, y)\n"
    unused = "unused = torch.nn.BCELoss()\n"
    wrapped = loop.format('    with torch.autocast("cuda"):\n    ').replace(
        "\n    loss", "\n        loss"
    )
    assert kinds(loop.format(""), wrapped) == [("autocast-refused", "t.py:5")]
    mse = loop.replace("BCELoss", "MSELoss")
    assert kinds(mse.format(""), wrapped.replace("BCELoss", "MSELoss")) == []
    # A BCELoss the file builds but never calls (PyTorch-GAN's softmax_gan) is no matter.
    mse_wrapped = wrapped.replace("BCELoss", "MSELoss")
    assert kinds(unused + mse.format(""), unused + mse_wrapped) == []


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # A use above the import that binds it (module order).
        ("x = 1\n", "x = torch.cuda.is_available()\n", []),
        ("import numpy\n", "t = numpy.ones(1)\nimport numpy\n", [("undefined-name", "t.py:2")]),
        # A try: import binds its name after the try statement, not before it.
        (
            "try:\n    import apex\nexcept ImportError:\n    apex = None\n",
            "apex.x()\ntry:\n    import apex\nexcept ImportError:\n    apex = None\n",
            [("undefined-name", "t.py:2")],
        ),
        # Function bodies run later: any module-level binding counts.
        ("def f():\n    pass\n", "def f():\n    return later\nlater = 1\n", []),
        # A name read unbound before the fix too is not the fix's doing.
        ("print(missing)\n", "print(missing)\n", []),
    ],
)
def test_new_undefined_names(before, after, expected):
    assert kinds(before, after) == expected


def test_mixed_indentation_added():
    before = "def f():\n\tx = DataLoader(ds)\n"
    after = "def f():\n\tx = DataLoader(\n\t    ds,\n\t)\n"
    assert kinds(before, after) == [("mixed-indentation", "t.py:4")]
    tabs = "def f():\n\tx = DataLoader(\n\t\tds,\n\t)\n"
    assert kinds(before, tabs) == []


def test_notebook_program_keeps_cell_lines(tmp_path):
    cells = [
        {"cell_type": "markdown", "source": ["# title"]},
        {"cell_type": "code", "source": ["!pip install x\n", "import torch"]},
        {"cell_type": "code", "source": "%%bash\nls"},
        {"cell_type": "code", "source": ["x = torch.zeros(1)"]},
    ]
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    text, labels = fs.program(path)
    lines = text.splitlines()
    assert labels[lines.index("import torch")] == "cell 2:2"
    assert labels[lines.index("x = torch.zeros(1)")] == "cell 4:1"
    compile(text, "n.ipynb", "exec")


TRAINER = """\
from transformers import Trainer, TrainingArguments
args = TrainingArguments("out"{})
{}
"""


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ('if __name__ == "__main__":\n    Trainer(args=args).train()', []),
        ("Trainer(args=args).train()", [("trainer-workers-unguarded", "t.py:4")]),
        ("", [("trainer-workers-unguarded", "t.py:4")]),  # where it trains is not seen
    ],
)
def test_trainer_workers_need_a_guarded_train(entry, expected):
    before = TRAINER.format("", entry)
    after = TRAINER.format(", dataloader_num_workers=2", entry)
    assert kinds(before, after) == expected
    assert kinds(after, after) == []


BIAS = """\
conv = torch.nn.Conv2d(3, 8, 3{})
bn = torch.nn.BatchNorm2d(8)
{}
"""


@pytest.mark.parametrize(
    ("uses", "expected"),
    [
        ("conv.bias.data.zero_()", [("bias-read", "t.py:3")]),
        ("torch.nn.init.zeros_(conv.bias)", [("bias-read", "t.py:3")]),
        ("if conv.bias is not None:\n    conv.bias.data.zero_()", []),
        ("ok = hasattr(conv, 'bias') and conv.bias.sum()", []),
        ("", []),
    ],
)
def test_bias_removed_where_the_code_uses_it(uses, expected):
    assert kinds(BIAS.format("", uses), BIAS.format(", bias=False", uses)) == expected


def test_bias_used_in_a_neighbouring_file():
    before, after = HEAD + BIAS.format("", ""), HEAD + BIAS.format(", bias=False", "")
    labels = [str(n) for n in range(1, before.count("\n") + 2)]
    found = fs.check(before, after, labels, "t.py", False, ["init.py:4"])
    assert [(v.kind, v.where) for v in found] == [("bias-read", "t.py:3")]
    assert "init.py:4" in found[0].message
