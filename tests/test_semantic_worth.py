"""Facts that tell whether a finding is worth acting on: toy networks, a `forward` that
steps through time over its inputs, a loss autocast refuses, the LightningModules a
Trainer fits."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.semantic import build
from torchlint.semantic.networks import TOY, toy

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def facts(code: str):
    return build(cst.parse_module(HEADER + code))


def test_toy_needs_every_count_and_a_small_sum():
    assert toy([1000, 2000])
    assert not toy([TOY // 2, TOY // 2])
    assert not toy([1000, None])  # a size the file does not show counts as large
    assert not toy([])


def test_plain_attributes_do_not_hide_a_class_size():
    m = facts(
        "class Net(nn.Module):\n"
        "    def __init__(self, hidden=16, lr=1e-3, name='mlp'):\n"
        "        super().__init__()\n"
        "        self.hidden, self.lr, self.name = hidden, lr, name\n"
        "        self.scale = lr\n"
        "        self.fc = nn.Linear(4, hidden)\n"
        "net = Net()\n"
    )
    site = next(s for s in m.models.sites if s.name == "net")
    assert m.networks.parameters(site) == 4 * 16 + 16


@pytest.mark.parametrize(
    ("loop", "expected"),
    [
        ("for t in range(1, trg.shape[0]):", True),
        ("n = trg.size(0)\n        for t in range(n):", True),
        ("for t in range(max_len):", True),
        ("for t in range(len(trg)):", True),
        ("for t in range(self.layers):", False),  # the model's own depth
        ("for t in range(3):", False),
    ],
)
def test_steps_over_input(loop, expected):
    m = facts(
        "class Decoder(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = 2\n"
        "        self.cell = nn.GRUCell(8, 8)\n"
        "    def forward(self, trg, max_len=10):\n"
        "        h = None\n"
        f"        {loop}\n"
        "            h = self.cell(trg[0], h)\n"
        "        return h\n"
        "model = Decoder()\n"
    )
    site = next(s for s in m.models.sites if s.name == "model")
    assert m.networks.steps_over_input(site) is expected


@pytest.mark.parametrize(
    ("loss", "refused"),
    [
        ("nn.BCELoss()(out, y)", True),
        ("F.binary_cross_entropy(out, y)", True),
        ("nn.BCEWithLogitsLoss()(out, y)", False),
        ("F.binary_cross_entropy_with_logits(out, y)", False),
    ],
)
def test_autocast_refused(loss, refused):
    m = facts(f"def step(out, y):\n    return {loss}\nloss = step(o, t)\n")
    call = next(c for c in m.calls if c.qualname is None and c.ctx.function is None)
    assert (m.workload.autocast_refused([call]) is not None) is refused


def test_trained_modules_are_the_fitted_classes():
    m = facts(
        "import lightning as L\n"
        "class Lit(L.LightningModule):\n"
        "    pass\n"
        "class Other(L.LightningModule):\n"
        "    pass\n"
        "def main(given):\n"
        "    model = Lit()\n"
        "    trainer = L.Trainer()\n"
        "    trainer.fit(model)\n"
        "    other = L.Trainer()\n"
        "    other.fit(given)\n"
        "    unfit = L.Trainer()\n"
    )
    fitted, passed, unfit = m.frameworks.trainers
    assert [c.node.name.value for c in m.frameworks.trained_modules(fitted)] == ["Lit"]
    assert m.frameworks.trained_modules(passed) == []  # a parameter: not known
    assert m.frameworks.trained_modules(unfit) == []
