"""What the fixture files cannot say: whole-file conditions (managed frameworks, CPU-only
files), options, --target-torch gates and the split between safe and unsafe fixes of
the batch-size (TL0xx), device (TL1xx) and data-loading (TL2xx) rules."""

from __future__ import annotations

import textwrap

import pytest

from torchlint.config.load import default_options, instantiate
from torchlint.lint.linter import Linter
from torchlint.semantic import Settings


def lint(code: str, source: str, target: tuple[int, int] | None = None, **options) -> list[int]:
    settings = Settings(options={**default_options(), **options}, target_torch=target)
    found = Linter(instantiate([code]), settings).lint(textwrap.dedent(source))
    return [v.line for v in found]


def fix(codes: list[str], source: str, unsafe: bool) -> str:
    linter = Linter(instantiate(codes), Settings(options=default_options()))
    return linter.fix(textwrap.dedent(source), unsafe=unsafe).text


TRAINING = """
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset
    {imports}
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(dataset, batch_size=32, pin_memory=True)
    model = nn.Linear(8, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        x = x.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
"""


def test_device_rules_fire_in_plain_pytorch():
    assert lint("TL101", TRAINING.format(imports="")) == [13]
    assert lint("TL105", TRAINING.format(imports="")) == [12]


@pytest.mark.parametrize(
    "imports",
    [
        "import lightning as L",
        "import pytorch_lightning as pl",
        "from accelerate import Accelerator",
        "from transformers import Trainer",
    ],
)
def test_managed_files_place_devices_themselves(imports: str):
    source = TRAINING.format(imports=imports)
    assert lint("TL101", source) == []
    assert lint("TL105", source) == []


LIGHTNING_CPU_ONLY = """
    import lightning as L
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    class Classifier(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = nn.Linear(8, 2)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self.model(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    dataset = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(dataset, batch_size=32)
    for x, y in loader:
        model = Classifier()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
"""


def test_lightning_models_are_not_moved_by_hand():
    assert lint("TL102", LIGHTNING_CPU_ONLY) == []
    # ... but Lightning trains on the GPU when there is one: pin its loaders.
    assert lint("TL202", LIGHTNING_CPU_ONLY) == [20]


def test_tl102_is_silent_where_a_helper_may_move_the_model():
    source = """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset
        from helpers import prepare

        dataset = TensorDataset(torch.randn(64, 784), torch.randint(0, 2, (64,)))
        loader = DataLoader(dataset, batch_size=32)
        net = prepare(nn.Linear(784, 512))
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in loader:
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            optimizer.step()
    """
    assert lint("TL102", source) == []
    # A name that mentions a device proves nothing: the trained network is still never moved.
    unmoved = source.replace("net = prepare(nn.Linear(784, 512))", "net = nn.Linear(784, 512)")
    assert lint("TL102", unmoved.replace("prepare", "to_device")) == [9]
    # `torch.set_default_device` places it where we cannot see.
    default = unmoved.replace("optimizer = ", "torch.set_default_device('cuda'); optimizer = ")
    assert lint("TL102", default) == []


def test_explicit_pin_memory_false_in_a_cpu_only_file():
    source = """
        import torch
        import torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset

        dataset = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
        loader = DataLoader(dataset, batch_size=32, pin_memory=False)
        unpinned = DataLoader(dataset, batch_size=32)
        model = nn.Linear(8, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
    """
    assert lint("TL202", source) == []
    # With a GPU: the training loader is reported; `unpinned` feeds no training loop.
    assert lint("TL202", source.replace("nn.Linear(8, 1)", "nn.Linear(8, 1).cuda()")) == [7]
    # A GPU named in the file: the network forgotten on the CPU is reported (TL102's
    # case), the one moved to the CPU on purpose is not (its loop feeds no GPU).
    named = source.replace("import torch.nn as nn", "import torch.nn as nn; model_device = 'cuda'")
    assert lint("TL202", named) == [7]
    assert lint("TL202", named.replace("nn.Linear(8, 1)", "nn.Linear(8, 1).to('cpu')")) == []


SMALL_BATCH = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    dataset = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = DataLoader(dataset, batch_size=16)
    model = torch.nn.Linear(8, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
"""


def test_min_batch_size_option():
    assert lint("TL001", SMALL_BATCH) == [6]
    # The same script on the CPU: a small batch costs no GPU time there.
    assert lint("TL001", SMALL_BATCH.replace(".cuda()", "")) == []
    both = {"min-batch-size": 16, "tiny-network-batch-size": 16}
    assert lint("TL001", SMALL_BATCH, **both) == []
    # A network of 9 parameters: launch overhead bounds its steps up to large batches.
    linter = Linter(instantiate(["TL001"]), Settings())
    message = linter.lint(textwrap.dedent(SMALL_BATCH))[0].message
    assert "for a network of 9 parameters" in message and "at least 64" in message
    options = {"min-batch-size": 64, "tiny-network-batch-size": 64}
    linter = Linter(instantiate(["TL001"]), Settings(options=options))
    assert "batch_size=64" in linter.fix(textwrap.dedent(SMALL_BATCH), unsafe=True).text
    assert "raise it to at least 64" in linter.lint(textwrap.dedent(SMALL_BATCH))[0].message
    assert "--tune-batch-size" in linter.lint(textwrap.dedent(SMALL_BATCH))[0].message
    # A network of unknown size: `min-batch-size` is the bar.
    unknown = SMALL_BATCH.replace("torch.nn.Linear(8, 1)", "build_model()")
    assert lint("TL001", unknown) == [6]
    assert lint("TL001", unknown.replace("batch_size=16", "batch_size=64")) == []


PERSISTENT = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    dataset = TensorDataset(torch.randn(64, 8))
    loader = DataLoader(dataset, batch_size=32, num_workers=2)
    model = torch.nn.Linear(8, 1).cuda()
    for epoch in range(3):
        for (x,) in loader:
            print(model(x.cuda()).sum())
"""


@pytest.mark.parametrize(
    ("target", "lines"), [(None, [6]), ((2, 4), [6]), ((1, 7), [6]), ((1, 6), [])]
)
def test_tl203_needs_persistent_workers_to_exist(target, lines):
    assert lint("TL203", PERSISTENT, target) == lines


WORKER_OPTIONS = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    dataset = TensorDataset(torch.randn(64, 8))
    default_prefetch = DataLoader(dataset, batch_size=32, prefetch_factor=2)
    more_prefetch = DataLoader(dataset, batch_size=32, prefetch_factor=4)
    persistent = DataLoader(dataset, batch_size=32, persistent_workers=True)
"""


@pytest.mark.parametrize(
    ("target", "lines"),
    [(None, [6, 7, 8]), ((2, 0), [6, 7, 8]), ((1, 13), [7, 8]), ((1, 6), [])],
)
def test_tl204_follows_the_prefetch_factor_change_of_torch_2(target, lines):
    assert lint("TL204", WORKER_OPTIONS, target) == lines


FACTORIES = """
    import torch

    device = "cuda"
    model = torch.nn.Linear(3, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):  # sizes above TL104's low-impact bound (4096 elements)
        a = torch.zeros(5000).to(device)
        b = torch.randn(5000).to(device)
        c = torch.arange(6000).cuda()
        d = torch.arange(0.0, 1.0, 0.5).cuda()
        model(a[:3] + b[:3] + c[:3] + d.sum()).sum().backward()
        optimizer.step()
"""


def test_tl104_random_and_inexact_factories_are_unsafe():
    safe = fix(["TL104"], FACTORIES, unsafe=False)
    assert "torch.zeros(5000, device=device)" in safe
    assert 'torch.arange(6000, device="cuda")' in safe
    assert "torch.randn(5000).to(device)" in safe
    assert "torch.arange(0.0, 1.0, 0.5).cuda()" in safe
    unsafe = fix(["TL104"], FACTORIES, unsafe=True)
    assert "torch.randn(5000, device=device)" in unsafe
    assert 'torch.arange(0.0, 1.0, 0.5, device="cuda")' in unsafe


def test_tl106_fixes_only_what_goes_into_load_state_dict():
    source = """
        import torch
        model = torch.nn.Linear(2, 2).to("cuda" if torch.cuda.is_available() else "cpu")
        model.load_state_dict(torch.load("a.pt"))
        checkpoint = torch.load("b.pt")
        model.load_state_dict(checkpoint["model"])
    """
    fixed = fix(["TL106"], source, unsafe=False)
    assert 'torch.load("a.pt", map_location="cpu")' in fixed
    assert 'checkpoint = torch.load("b.pt")\n' in fixed
    assert lint("TL106", source) == [4, 5]


def test_tl102_spells_torch_as_the_file_imports_it():
    source = """
        import torch as T
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(T.randn(64, 784), T.randint(0, 2, (64,))), batch_size=32)
        net = nn.Linear(784, 512)
        opt = T.optim.SGD(net.parameters(), lr=0.1)
        for x, y in loader:
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
    """
    fixed = fix(["TL102"], source, unsafe=True)
    assert 'device = T.device("cuda" if T.cuda.is_available() else "cpu")' in fixed
    assert "net = net.to(device)" in fixed
    # The batches move in the same edit (a model moved alone fails its first step).
    assert (
        "    x = x.to(device, non_blocking=True)\n    y = y.to(device, non_blocking=True)\n"
        in fixed
    )
    assert fixed.count("import torch") == 1


def test_tl104_reads_only_files_where_a_factory_is_moved_or_a_tensor_type_named():
    from rules.tl104_cpu_tensor_then_moved import PATTERN

    shapes = [  # every way a finding's text can be spelled
        "torch.zeros(3).cuda()",
        "torch.zeros(3).to(device)",
        "torch.randn(4, 8).type_as(x)",
        "th.ones_like(x).cuda()",
        "zeros(len(x[f(i)]), dtype=d(g(0))).cuda()",  # three levels inside the call
        "(torch.zeros(3)\n    .to(device))",
        "(torch.zeros(3)  # built on the CPU\n    # then moved\n    .cuda())",
        "torch.zeros(3) \\\n    .cuda()",
        "torch.from_numpy(np.ones(4)).float().cuda()",
        "torch.tensor(np.zeros(4)).float() \\\n .contiguous().to(device)",
        "z = Tensor(np.random.normal(0, 1, (64, 100)))  # Tensor = torch.cuda.FloatTensor",
        "from torch.cuda import LongTensor\nLongTensor(np.zeros(3))",
    ]
    for text in shapes:
        assert PATTERN.search(text), text
    near = [  # a name, an attribute, a subscript or another call moved: not parsed
        "model.to(device)",
        "x = x.cuda(non_blocking=True)",
        "batch['x'].to(device)",
        "self.proj(x).to(dtype)",  # most model code
        "x.float().cuda()",
        "nonzeros(3).cuda()",  # a factory's name inside another one
        "torch.zeros(3).sum()",
        "Tensor(3)",
    ]
    for text in near:
        assert not PATTERN.search(text), text


def test_tl106_reads_only_files_that_may_run_without_a_gpu_or_distributed():
    from rules.tl106_torch_load_without_map_location import PATTERN

    shapes = [  # what makes a load's device matter, as a file spells it
        "if torch.cuda.is_available():",
        "model.to(device)",
        "model = model.cuda()",
        "import torch.distributed as dist",
        "from torch.nn.parallel import DistributedDataParallel as DDP",
    ]
    for text in shapes:
        assert PATTERN.search(text), text
    alone = "import torch\nmodel.load_state_dict(torch.load(path))\nmodel.eval()\n"
    assert not PATTERN.search(alone)  # where the device is not in question
