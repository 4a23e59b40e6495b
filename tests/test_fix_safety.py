"""benchmarks/fix_safety.py's comparison of a file before and after `fix --unsafe-fixes`,
on small programs written here (the corpus run itself is the benchmark's)."""

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
    before, after = MODULE_LEVEL.format(""), MODULE_LEVEL.format(", num_workers=NUM_WORKERS")
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


@pytest.mark.parametrize(("uses", "expected"), [("p.grad += g", 1), ("p.grad = g", 0)])
def test_set_to_none_removed_where_gradients_are_updated_in_place(uses, expected):
    code = "for p, g in zip(params, grads):\n    {}\nopt.step()\nopt.zero_grad({})\n"
    before, after = code.format(uses, "set_to_none=False"), code.format(uses, "")
    assert [k for k, _ in kinds(before, after)] == ["explicit-arg"] * expected


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
    after = TRAINER.format(", dataloader_num_workers=NUM_WORKERS", entry)
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
