"""TL3xx-TL5xx: near misses that need a file of their own, and behaviour the fixture
files cannot show (target-torch gating, imports a fix adds)."""

from __future__ import annotations

import pytest

from torchlint.config.load import default_options, instantiate
from torchlint.lint.linter import Linter
from torchlint.semantic import Settings


def linter(*codes: str, target_torch: tuple[int, int] | None = None) -> Linter:
    """The rules' linter with low-impact findings shown (and fixed): TL502's are all low."""
    settings = Settings(options=default_options(), target_torch=target_torch)
    return Linter(instantiate(list(codes)), settings, low_impact=True)


def fix(code: str, *codes: str, target_torch: tuple[int, int] | None = None) -> str:
    return linter(*codes, target_torch=target_torch).fix(code, unsafe=True).text


def codes_found(code: str, *codes: str, target_torch: tuple[int, int] | None = None):
    return [(v.line, v.code) for v in linter(*codes, target_torch=target_torch).lint(code)]


def test_sampler_fix_feeds_set_epoch_fix_in_one_run():
    """TL303's fix adds the DistributedSampler TL304 then checks: one `fix` does both,
    and a second one changes nothing (the linter re-selects rules after each pass)."""
    source = (
        "import torch\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.utils.data import DataLoader\n"
        "\n"
        "def main(ds, net, opt):\n"
        '    torch.distributed.init_process_group("nccl")\n'
        "    model = DDP(net)\n"
        "    loader = DataLoader(ds, batch_size=8, shuffle=True, num_workers=4)\n"
        "    for epoch in range(3):\n"
        "        for x in loader:\n"
        "            model(x).sum().backward()\n"
        "            opt.step()\n"
    )
    fixed = fix(source, "TL303", "TL304")
    assert "sampler=DistributedSampler(ds, shuffle=True), num_workers=4)" in fixed
    assert "from torch.utils.data import DataLoader, DistributedSampler\n" in fixed
    assert "    for epoch in range(3):\n        loader.sampler.set_epoch(epoch)\n" in fixed
    assert fix(fixed, "TL303", "TL304") == fixed


def test_sampler_fix_not_offered_before_the_process_group_exists():
    source = (
        "import torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.utils.data import DataLoader\n"
        "\n"
        "def main(ds, net, opt):\n"
        "    loader = DataLoader(ds, batch_size=8, shuffle=True, num_workers=4)\n"
        '    dist.init_process_group("nccl")\n'
        "    model = DDP(net)\n"
        "    for x in loader:\n"
        "        model(x).sum().backward()\n"
        "        opt.step()\n"
    )
    assert codes_found(source, "TL303") == [(6, "TL303")]
    assert fix(source, "TL303") == source


@pytest.mark.parametrize(
    ("line", "before_2_0", "from_2_0"),
    [
        # An explicit choice is reported, never changed.
        ("opt.zero_grad(set_to_none=False)",) * 3,
        ("model.zero_grad(False)",) * 3,
        ("opt.zero_grad()", "opt.zero_grad(set_to_none=True)", "opt.zero_grad()"),
    ],
)
def test_zero_grad_follows_target_torch(line, before_2_0, from_2_0):
    source = f"import torch\n{line}\n"
    assert fix(source, "TL405", target_torch=(1, 13)) == f"import torch\n{before_2_0}\n"
    assert fix(source, "TL405", target_torch=(2, 4)) == f"import torch\n{from_2_0}\n"
    assert fix(source, "TL405") == f"import torch\n{from_2_0}\n"


def test_zero_grad_catches_what_torchfix_tor402_catches():
    # TOR402: any `.zero_grad(...)` whose `set_to_none` (keyword or first positional) is False.
    for line in (
        "optimizer.zero_grad(set_to_none=False)",
        "optimizer.zero_grad(False)",
        "model.zero_grad(set_to_none=False)",
        "self.opt.zero_grad(set_to_none=False)",
        "torch.optim.SGD(ps).zero_grad(False)",
    ):
        assert codes_found(f"import torch\n{line}\n", "TL405") == [(2, "TL405")], line


def test_amp_fix_imports_torch_and_drops_the_dead_import():
    source = "from torch.cuda.amp import autocast\n\nwith autocast(dtype=x):\n    pass\n"
    assert (
        fix(source, "TL502") == 'import torch\n\nwith torch.autocast("cuda", dtype=x):\n    pass\n'
    )


def test_amp_is_gated_by_target_torch():
    source = (
        "import torch\n"
        "scaler = torch.cuda.amp.GradScaler()\n"
        "with torch.cuda.amp.autocast():\n"
        "    pass\n"
    )
    assert codes_found(source, "TL502") == [(2, "TL502"), (3, "TL502")]
    # torch.amp.GradScaler("cuda") arrived in 2.3, torch.autocast in 1.10.
    assert codes_found(source, "TL502", target_torch=(2, 2)) == [(3, "TL502")]
    assert codes_found(source, "TL502", target_torch=(1, 9)) == []


def test_host_sync_needs_cuda():
    source = (
        "import torch\n"
        "model = torch.nn.Linear(2, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(3):\n"
        "    loss = model(torch.randn(4, 2)).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    print(loss.item())\n"
    )
    assert codes_found(source, "TL401") == []
    on_gpu = source.replace("torch.nn.Linear(2, 1)", 'torch.nn.Linear(2, 1).to("cuda")')
    assert codes_found(on_gpu, "TL401") == [(8, "TL401")]


def test_host_sync_reads_only_files_that_call_a_backward_pass_or_define_a_training_step():
    from rules.tl401_host_sync_in_training_loop import PATTERN

    shapes = [
        "loss.backward()",
        "scaler.scale(loss).backward()",
        "accelerator.backward(loss)",
        "self.manual_backward(loss)",
        "torch.autograd.backward(tensors)",
        "loss.backward (retain_graph=True)",
        "def training_step(self, batch, batch_idx):",
    ]
    for text in shapes:
        assert PATTERN.search(text), text
    near = [
        "# kept for backward compatibility",
        "def backward(ctx, grad_output):",  # an autograd Function: no training loop
        "register_full_backward_hook",
    ]
    for text in near:
        assert not PATTERN.search(text), text


def test_transformers_trainer_through_plain_import_is_managed():
    source = (
        "import torch\n"
        "import transformers\n"
        'model = torch.nn.Linear(8192, 8192).to("cuda")\n'
        "n_gpu = torch.cuda.device_count()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in torch.utils.data.DataLoader(data, batch_size=64):\n"
        "    model(x.cuda()).sum().backward()\n"
        "    opt.step()\n"
    )
    assert codes_found(source, "TL301") == [(3, "TL301")]
    managed = source + "trainer = transformers.Trainer(model=model)\n"
    assert codes_found(managed, "TL301") == []


def test_model_not_parallel_needs_several_gpus():
    """TL301 speaks only where the file says it runs on several GPUs (a device count, an
    option naming their number, a launcher's rank), and never in a notebook, which one
    process runs (no torchrun) and where `DataParallel` is discouraged."""
    source = (
        "import torch\n"
        'model = torch.nn.Linear(8192, 8192).to("cuda")\n'
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in torch.utils.data.DataLoader(data, batch_size=64):\n"
        "    model(x.cuda()).sum().backward()\n"
        "    opt.step()\n"
    )
    assert codes_found(source, "TL301") == []
    for says in (
        "print(torch.cuda.device_count())\n",
        "parser.add_argument('--ngpu', type=int, default=2)\n",
        "local_rank = int(os.environ['LOCAL_RANK'])\n",
        "config = {'num_gpus': 4}\n",
    ):
        assert codes_found(source + says, "TL301") == [(2, "TL301")], says
    several = source + "print(torch.cuda.device_count())\n"
    assert linter("TL301").lint(several, "train.ipynb") == []
