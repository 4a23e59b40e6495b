"""The module model: names resolve through imports, loops and loaders are linked."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.model import DATALOADER, MISSING, build_model, int_value


def model_of(code: str):
    return build_model(cst.parse_module(code))


@pytest.mark.parametrize(
    "code",
    [
        "import torch\ntorch.utils.data.DataLoader(ds)\n",
        "import torch as T\nT.utils.data.DataLoader(ds)\n",
        "from torch.utils.data import DataLoader as DL\nDL(ds)\n",
        "from torch.utils import data\ndata.DataLoader(ds)\n",
        "import torch.utils.data as tud\ntud.DataLoader(ds)\n",
        "from torch.utils.data.dataloader import DataLoader\nDataLoader(ds)\n",
        "def f():\n    from torch.utils.data import DataLoader\n    return DataLoader(ds)\n",
    ],
)
def test_dataloader_resolves_through_imports(code):
    model = model_of(code)
    assert [site.qualname for site in model.calls_to(DATALOADER)] == [DATALOADER]
    assert len(model.dataloaders) == 1


@pytest.mark.parametrize(
    "code",
    [
        "from mylib import DataLoader\nDataLoader(ds)\n",
        "DataLoader(ds)\n",
        "import data\ndata.DataLoader(ds)\n",
        "from torch.utils.data import Dataset\nclass DataLoader: ...\nDataLoader(ds)\n",
    ],
)
def test_lookalikes_do_not_resolve(code):
    assert model_of(code).dataloaders == []


def test_nn_alias_and_spelling():
    model = model_of("import torch.nn as nn\nfrom torch import optim\n")
    assert model.resolve(cst.parse_expression("nn.DataParallel")) == "torch.nn.DataParallel"
    assert model.resolve(cst.parse_expression("optim.SGD")) == "torch.optim.SGD"
    assert model.spell("torch.nn.Linear") == ("nn.Linear", None)
    text, needed = model.spell("torch.cuda.is_available")
    assert text == "torch.cuda.is_available" and needed is not None and needed.module == "torch"


def test_positional_and_keyword_arguments():
    model = model_of(
        "from torch.utils.data import DataLoader\n"
        "a = DataLoader(ds, 64, True, None, None, 4)\n"
        "b = DataLoader(ds, batch_size=8, num_workers=2)\n"
        "c = DataLoader(*args, **kwargs)\n"
    )
    a, b, c = model.dataloaders
    assert int_value(a.arg("batch_size")) == 64 and int_value(a.arg("num_workers")) == 4
    assert int_value(b.arg("num_workers")) == 2 and b.arg("pin_memory") is MISSING
    assert a.bound_to == "a" and c.opaque and not a.opaque


def test_loops_loaders_and_training():
    model = model_of(
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds)\n"
        "def train(model, data):\n"
        "    for i, (x, y) in enumerate(data):\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "for epoch in range(3):\n"
        "    train(net, loader)\n"
        "    for x, y in tqdm(loader):\n"
        "        pass\n"
    )
    (loader,) = model.dataloaders
    inner = [loop for loop in model.loops if loop.is_training]
    assert len(inner) == 1 and inner[0].loaders == [loader]
    assert inner[0].batch_names() == ["x", "y"]
    assert model.feeds_training_loop(loader)
    epoch = model.loops[1]
    assert epoch.is_epoch_loop and not epoch.is_training


def test_models_and_moves():
    model = model_of(
        "import torch\nimport torch.nn as nn\n"
        "class Net(nn.Module):\n    pass\n"
        "class Deeper(Net):\n    pass\n"
        "a = Net()\nb = Deeper().to('cuda')\nc = nn.Linear(2, 2)\nc.cuda()\nd = make()\n"
    )
    by_name = {m.name: m for m in model.models}
    assert set(by_name) == {"a", "b", "c"}
    assert not by_name["a"].moved and by_name["b"].moved and by_name["c"].moved
    assert model.uses_cuda


def test_managed_frameworks():
    assert model_of("import lightning as L\n").managed
    assert model_of("from accelerate import Accelerator\n").managed
    assert model_of("from transformers import Trainer\n").managed
    assert not model_of("from transformers import AutoModel\n").managed
    assert not model_of("import torch\n").managed
