"""The semantic layer: scopes and resolution, the device lattice, model identity,
training loops by what they call, constants, loaders."""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.edits import set_arg, spell
from torchlint.semantic import DATALOADER, MISSING, DeviceKind, ModelKind, build
from torchlint.semantic.syntax import int_value


def model_of(code: str):
    return build(cst.parse_module(code))


def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


# -- names and scopes ----------------------------------------------------------------


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
        "def f():\n    return DataLoader(ds)\nfrom torch.utils.data import DataLoader\n",
    ],
)
def test_dataloader_resolves_through_imports(code):
    model = model_of(code)
    assert [site.qualname for site in model.calls_to(DATALOADER)] == [DATALOADER]
    assert len(model.loaders.sites) == 1


@pytest.mark.parametrize(
    "code",
    [
        "from mylib import DataLoader\nDataLoader(ds)\n",
        "DataLoader(ds)\n",
        "import data\ndata.DataLoader(ds)\n",
        "from torch.utils.data import Dataset\nclass DataLoader: ...\nDataLoader(ds)\n",
        # an import inside one function binds nothing in another
        "def f():\n    from torch.utils.data import DataLoader\ndef g():\n    DataLoader(ds)\n",
        # a parameter shadows the module's import
        "from torch.utils.data import DataLoader\ndef g(DataLoader):\n    DataLoader(ds)\n",
    ],
)
def test_lookalikes_and_shadows_do_not_resolve(code):
    assert model_of(code).loaders.sites == []


def test_scopes_follow_python():
    model = model_of(
        "import torch\n"
        "x = 1\n"
        "class C:\n"
        "    x = 2\n"
        "    def m(self):\n"
        "        return x\n"  # the module's x: class bodies are not enclosing scopes
        "def f():\n"
        "    global x\n"
        "    x = 3\n"
        "def g():\n"
        "    torch = None\n"
        "    return torch.zeros(1)\n"
    )
    module_x = model.scope.symbols["x"]
    assert len(module_x.bindings) == 2  # `x = 1` and the `global x` assignment in f
    (g_call,) = [c for c in model.calls if c.method == "zeros"]
    assert g_call.qualname is None  # a local `torch` shadows the import


def test_a_symbol_knows_the_names_that_read_it():
    """A name's references: where it is read (a `del` too), looked up as Python does
    (defaults, decorators and annotations in the scope around a def, not a class body
    from its methods); not where it is bound, imported or declared, nor an attribute's,
    a keyword's or a match capture's name of the same spelling."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    tree = cst.parse_module(
        "from torch.cuda.amp import autocast\n"
        "@autocast\n"  # read
        "def f(autocast=autocast, *, x: autocast = None) -> autocast:\n"  # read 3 times
        "    global y\n"
        "    y = autocast\n"  # f's parameter
        "    return torch.autocast, g(autocast=1)\n"  # neither reads it
        "class C:\n"
        "    autocast = 2\n"
        "    def m(self):\n"
        "        return autocast, (lambda autocast=autocast: autocast)\n"  # read twice
        "match y:\n"
        "    case [autocast]:\n"  # a capture
        "        del autocast\n"
    )
    positions = MetadataWrapper(tree, unsafe_skip_copy=True).resolve(PositionProvider)
    model = build(tree)

    def lines(symbol):
        return [positions[name].start.line for name in symbol.references]

    assert lines(model.scope.symbols["autocast"]) == [2, 3, 3, 3, 10, 10, 13]
    (f,) = [s for s in model.facts.scopes.values() if s.node is tree.body[1]]
    assert lines(f.symbols["autocast"]) == [5]
    assert lines(model.scope.symbols["y"]) == [11]


def test_builtins_resolve_unless_shadowed():
    model = model_of("def float(x):\n    return x\nfloat(1)\nint(2)\n")
    qualnames = [c.qualname for c in model.calls]
    assert qualnames == [None, "int"]


def test_nn_alias_and_spelling():
    model = model_of("import torch.nn as nn\nfrom torch import optim\n")
    assert model.resolve(expr("nn.DataParallel")) == "torch.nn.DataParallel"
    assert model.resolve(expr("optim.SGD")) == "torch.optim.SGD"
    assert model.spelling("torch.nn.Linear") == "nn.Linear"
    assert model.spelling("torch.cuda.is_available") is None
    assert spell(model, "torch.nn.Linear") == ("nn.Linear", None)
    text, needed = spell(model, "torch.cuda.is_available")
    assert text == "torch.cuda.is_available" and needed is not None and needed.module == "torch"


def test_spelling_avoids_a_shadowed_alias():
    model = model_of("import torch.nn as nn\ndef f(nn):\n    nn(1)\n")
    (call,) = model.calls
    text, needed = spell(model, "torch.nn.Linear", call.scope)
    assert text == "torch.nn.Linear" and needed is not None


def test_self_attributes_are_bindings_methods_read():
    model = model_of(
        "import torch.nn as nn\n"
        "class Base:\n"
        "    def __init__(self):\n"
        "        self.net = nn.Linear(2, 2)\n"
        "class Trainer(Base):\n"
        "    def step(self, x):\n"
        "        return self.net(x)\n"
    )
    (call,) = [c for c in model.calls if c.method == "net"]
    site = model.models.called(call)
    assert site is not None and site.name == "self.net" and site.kind is ModelKind.NETWORK


# -- values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "value", "origin"),
    [
        ("BS = 8\nf(BS)\n", 8, "name"),
        (
            "import argparse\np = argparse.ArgumentParser()\n"
            "p.add_argument('--batch-size', type=int, default=16)\nargs = p.parse_args()\n"
            "f(args.batch_size)\n",
            16,
            "argparse",
        ),
        (
            "import argparse\ndef get_args():\n    p = argparse.ArgumentParser()\n"
            "    p.add_argument('-b', '--batch', dest='bs', default=4)\n"
            "    return p.parse_args()\nargs = get_args()\nf(args.bs)\n",
            4,
            "argparse",
        ),
        ("cfg = {'batch_size': 64}\nf(cfg['batch_size'])\n", 64, "config"),
        ("import types\ncfg = types.SimpleNamespace(lr=0.5)\nf(cfg.lr)\n", 0.5, "config"),
        ("def g(bs=8):\n    f(bs)\n", 8, "default"),
        ("def g(bs=8):\n    f(bs)\ng(32)\ng(bs=32)\n", 32, "argument"),
        # ignite's examples: the launcher's parameters caught by `locals()`, handed on.
        (
            "def training(rank, config):\n    f(config['every'])\n"
            "def run(every=3):\n    config = locals()\n    parallel.run(training, config)\n",
            3,
            "config",
        ),
        # `mp.spawn` hands `args=` to the parameters after the rank.
        (
            "import torch.multiprocessing as mp\n"
            "def worker(gpu, n, bs):\n    f(bs)\n"
            "mp.spawn(worker, nprocs=2, args=(2, 64))\n",
            64,
            "argument",
        ),
    ],
)
def test_constants(code, value, origin):
    model = model_of(code)
    call = next(c for c in model.calls if dotted(c.node.func) == "f")
    found = model.values.constant(call.node.args[0].value, call.scope)
    assert found is not None and (found.value, found.origin) == (value, origin)


@pytest.mark.parametrize(
    "code",
    [
        "BS = 8\nBS = 16\nf(BS)\n",  # rebound
        "def g(bs=8):\n    f(bs)\ng(32)\ng(8)\n",  # the calls disagree
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--bs')\n"
        "args = p.parse_args()\nf(args.bs)\n",  # no default
        "f(len(x))\n",
        # `map` hands its items to the first parameter: not a launcher.
        "def worker(gpu, bs):\n    f(bs)\nmap(worker, [1, 2])\n",
    ],
)
def test_not_constants(code):
    model = model_of(code)
    call = next(c for c in model.calls if dotted(c.node.func) == "f")
    assert model.values.constant(call.node.args[0].value, call.scope) is None


def dotted(node):
    from torchlint.semantic.syntax import dotted_name

    return dotted_name(node)


# -- devices ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setup", "device", "kind", "index"),
    [
        ("", '"cuda"', DeviceKind.CUDA, None),
        ("", '"cuda:1"', DeviceKind.CUDA, 1),
        ("", '"cpu"', DeviceKind.CPU, None),
        ("", '"mps"', DeviceKind.ACCELERATOR, None),
        ("rank = 0\n", 'f"cuda:{rank}"', DeviceKind.CUDA, None),
        ("rank = 0\n", '"cuda:%d" % rank', DeviceKind.CUDA, None),
        ("rank = 0\n", '"cuda:{}".format(rank)', DeviceKind.CUDA, None),
        ("", 'torch.device("cuda", 2)', DeviceKind.CUDA, 2),
        ("", "torch.accelerator.current_accelerator()", DeviceKind.ACCELERATOR, None),
        ("", '"cuda" if torch.cuda.is_available() else "cpu"', DeviceKind.CUDA, None),
        (
            'd = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
            "d",
            DeviceKind.CUDA,
            None,
        ),
        (
            "if use_accel:\n    d = torch.accelerator.current_accelerator()\n"
            'else:\n    d = torch.device("cpu")\n',
            "d",
            DeviceKind.ACCELERATOR,
            None,
        ),
        ("", "x.device", DeviceKind.UNKNOWN, None),  # a tensor's or module's device
        ("", "args.device", DeviceKind.UNKNOWN, None),
        ("", "dev", None, None),  # not known to be a device at all
        (
            "import argparse\np = argparse.ArgumentParser()\n"
            "p.add_argument('--device', default='cuda')\nargs = p.parse_args()\n",
            "args.device",
            DeviceKind.CUDA,
            None,
        ),
        (
            "import argparse\np = argparse.ArgumentParser()\n"
            "p.add_argument('--device', default='cpu')\nargs = p.parse_args()\n",
            "args.device",
            DeviceKind.UNKNOWN,  # a command-line option is never only the CPU
            None,
        ),
        ("local_rank = int(os.environ['LOCAL_RANK'])\n", "local_rank", None, None),
        ("", "0", DeviceKind.CUDA, 0),
        ('def get():\n    return torch.device("cuda")\n', "get()", DeviceKind.CUDA, None),
    ],
)
def test_device_lattice(setup, device, kind, index):
    model = model_of(f"import torch\n{setup}use({device})\n")
    call = next(c for c in model.calls if dotted(c.node.func) == "use")
    found = model.devices.classify(call.node.args[0].value, call.scope)
    assert (found.kind if found else None, found.index if found else None) == (kind, index)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("x.to('cuda')", DeviceKind.CUDA),
        ("x.cuda()", DeviceKind.CUDA),
        ("x.cuda(local_rank)", DeviceKind.CUDA),
        ("x.to(args.device)", DeviceKind.UNKNOWN),
        ("x.to(device=dev)", DeviceKind.UNKNOWN),
        ("x.to(torch.float16)", None),
        ("x.to(torch.randn(2))", None),
        ("x.to(memory_format=torch.channels_last)", None),
        ("x.to('cpu')", DeviceKind.CPU),
    ],
)
def test_moves(code, kind):
    model = model_of(f"import torch\n{code}\n")
    call = next(c for c in model.calls if c.method in ("to", "cuda"))
    found = model.devices.move(call)
    assert (found.kind if found else None) == kind


# -- models ----------------------------------------------------------------------------


def test_models_and_moves():
    model = model_of(
        "import torch\nimport torch.nn as nn\n"
        "class Net(nn.Module):\n    def __init__(self):\n        self.fc = nn.Linear(2, 2)\n"
        "class Deeper(Net):\n    pass\n"
        "class Flat(nn.Module):\n    def forward(self, x):\n        return x.flatten(1)\n"
        "class FocalLoss(nn.Module):\n    def __init__(self):\n        self.g = 2\n"
        "a = Net()\nb = Deeper().to('cuda')\nc = nn.Linear(2, 2)\nc.cuda()\nd = make()\n"
        "e = nn.CrossEntropyLoss().cuda()\nf = nn.ReLU()\ng = Flat()\nh = FocalLoss()\n"
        "i = nn.DataParallel(c)\n"
    )
    by_name = {m.name: m for m in model.models.sites if "." not in m.name}
    kinds = {name: site.kind for name, site in by_name.items()}
    assert kinds == {
        "a": ModelKind.NETWORK,
        "b": ModelKind.NETWORK,
        "c": ModelKind.NETWORK,
        "e": ModelKind.LOSS,
        "f": ModelKind.STATELESS,
        "g": ModelKind.STATELESS,
        "h": ModelKind.LOSS,
    }
    assert not by_name["a"].moves and by_name["b"].moves and by_name["c"].moves
    assert [s.name for s in by_name["c"].symbols] == ["c", "i"] and by_name["c"].wrappers
    assert model.placement.uses_gpu


def test_model_identity_through_parameters_and_helpers():
    model = model_of(
        "import torch\nimport torch.nn as nn\n"
        "def build():\n    net = nn.Linear(2, 2)\n    return net.cuda()\n"
        "def train(m, data):\n    m.to('cuda')\n    for x in data:\n        m(x)\n"
        "model = build()\ntrain(model, [])\n"
    )
    (site,) = [m for m in model.models.sites]
    assert {s.name for s in site.symbols} == {"net", "model", "m"}
    assert len(site.moves) == 2


def test_pretrained_networks_of_diffusers_and_peft_and_adapter_wrappers():
    model = model_of(
        "from diffusers import DDPMScheduler, DiffusionPipeline, UNet2DConditionModel\n"
        "from peft import AutoPeftModelForCausalLM, get_peft_model\n"
        "from transformers import AutoModelForCausalLM\n"
        "unet = UNet2DConditionModel.from_pretrained('sd', subfolder='unet')\n"
        "scheduler = DDPMScheduler.from_pretrained('sd', subfolder='scheduler')\n"
        "pipe = DiffusionPipeline.from_pretrained('sd')\n"
        "chat = AutoPeftModelForCausalLM.from_pretrained('org/lora')\n"
        "base = AutoModelForCausalLM.from_pretrained('gpt2')\n"
        "lora = get_peft_model(base, config)\n"
        "lora.cuda()\n"
    )
    assert [m.name for m in model.models.sites] == ["unet", "chat", "base"]
    assert all(m.kind is ModelKind.NETWORK for m in model.models.sites)
    base = model.models.sites[2]
    assert {s.name for s in base.symbols} == {"base", "lora"} and len(base.moves) == 1


def test_losses_are_not_networks():
    model = model_of(
        "import torch.nn as nn\ncriterion = nn.CrossEntropyLoss().cuda()\n"
        "adversarial_loss = nn.BCELoss()\nadversarial_loss.cuda()\n"
    )
    assert all(m.kind is ModelKind.LOSS for m in model.models.sites)


# -- loops -----------------------------------------------------------------------------


def test_loops_loaders_and_training():
    model = model_of(
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "from tqdm import tqdm\n"
        "loader = DataLoader(ds)\n"
        "def train(model, data, opt):\n"
        "    for i, (x, y) in enumerate(data):\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "for epoch in range(3):\n"
        "    train(net, loader, optimizer)\n"
        "    for x, y in tqdm(loader):\n"
        "        pass\n"
    )
    (loader,) = model.loaders.sites
    (inner,) = [loop for loop in model.loops if loop.is_training]
    assert inner.loaders == [loader] and inner.is_step_loop
    assert loader.feeds_training
    epoch = model.loops[1]  # calls `train`, which loops over its steps: not a step itself
    assert epoch.is_epoch_loop and not epoch.is_training


def test_a_helper_that_runs_one_step_makes_a_step_loop():
    model = model_of(
        "import torch\n"
        "opt = torch.optim.SGD(params)\n"
        "def train_step(x):\n"
        "    loss = model(x)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    return loss\n"
        "for x in loader:\n"
        "    total += train_step(x).item()\n"
    )
    (loop,) = model.loops
    assert loop.is_step_loop


def test_the_losses_of_a_loop_are_what_its_body_backpropagates():
    model = model_of(
        "for x in loader:\n"
        "    loss = model(x)\n"
        "    out = model(x)\n"
        "    scaler.scale(loss).backward()\n"
        "    out.loss.backward()\n"
        "    accelerator.backward(loss)\n"
        "    total.backward()\n"  # bound outside the loop
        "    model(x).sum().backward()\n"  # no name
        "    loss = loss.item()\n"
    )
    (loop,) = model.loops
    assert loop.losses == {"loss", "out.loss"}


def test_scheduler_is_not_an_optimizer():
    model = model_of(
        "import torch\n"
        "opt = torch.optim.SGD(params, lr=0.1)\n"
        "sched = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
        "for epoch in range(3):\n"
        "    for x in loader:\n"
        "        wrapper.train_step(x)\n"
        "        model(x).sum().backward()\n"
        "    sched.step()\n"
    )
    assert not any(loop.is_training for loop in model.loops)


def test_a_class_wrapping_an_optimizer_steps_it():
    model = model_of(
        "import torch\n"
        "class ScheduledOptim:\n"
        "    def __init__(self, optimizer):\n"
        "        self._optimizer = optimizer\n"
        "    def step_and_update_lr(self):\n"
        "        self._optimizer.step()\n"
        "optimizer = ScheduledOptim(torch.optim.Adam(params))\n"
        "for x in loader:\n"
        "    loss = model(x)\n"
        "    loss.backward()\n"
        "    optimizer.step_and_update_lr()\n"
    )
    (loop,) = model.loops
    assert loop.is_step_loop


def test_another_librarys_optimizer_is_known_by_its_name():
    """A class of an `optim` package or named `*Optimizer` steps the parameters, also
    where the backward pass runs in an inner loop (MAML's tasks); a scheduler of such a
    package does not."""
    model = model_of(
        "import torch, cherry, horovod.torch as hvd\n"
        "from timm.scheduler import CosineLRScheduler\n"
        "opt = torch.optim.Adam(params)\n"
        "opt = cherry.optim.Distributed(params, opt=opt)\n"
        "dist = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=0.1))\n"
        "sched = CosineLRScheduler(opt, t_initial=10)\n"
        "for iteration in range(10):\n"
        "    for task in range(32):\n"
        "        model(x).sum().backward()\n"
        "    opt.step()\n"
        "    dist.step()\n"
        "    sched.step(iteration)\n"
    )
    outer, inner = model.loops
    assert outer.is_step_loop and not inner.steps
    assert len(outer.steps) == 2  # not the scheduler's


def test_a_step_through_an_unknown_optimizer_needs_a_backward_beside_it():
    model = model_of(
        "def fit(model, opt, sched, loader):\n"
        "    for epoch in range(3):\n"
        "        for x in loader:\n"
        "            model(x).backward()\n"
        "            opt.step()\n"
        "        sched.step()\n"
    )
    epoch, step = model.loops
    assert step.is_step_loop and len(epoch.steps) == 1  # `sched.step()` is not a step


def test_the_optimizer_a_step_acts_on():
    model = model_of(
        "import torch\n"
        "opt = torch.optim.SGD(params, lr=0.1)\n"
        "other = torch.optim.Adam(params)\n"
        "scaler = torch.amp.GradScaler('cuda')\n"
        "either = opt if fast else other\n"
        "def fit(optimizer):\n"
        "    optimizer.step()\n"
        "fit(opt)\n"
        "opt.zero_grad(set_to_none=False)\n"
        "scaler.step(opt)\n"
        "other.step()\n"
        "either.step()\n"
        "model.zero_grad()\n"
        "torch.optim.SGD(params).step()\n"
        "def build(params):\n"
        "    return torch.optim.AdamW(params)\n"
        "made, sched = build(params), None\n"
        "made.step()\n"
    )
    opt, other, anonymous, made = (
        c.node
        for c in model.calls
        if c.qualname in ("torch.optim.SGD", "torch.optim.Adam", "torch.optim.AdamW")
    )
    stepped = {
        model.module.code_for_node(c.node): model.training.stepped(c)
        for c in model.calls
        if c.method in ("step", "zero_grad")
    }
    assert stepped == {
        "optimizer.step()": opt,  # a parameter every call passes `opt` to
        "opt.zero_grad(set_to_none=False)": opt,
        "scaler.step(opt)": opt,  # the optimizer, not the scaler
        "other.step()": other,
        "either.step()": None,  # one of two
        "model.zero_grad()": None,
        "torch.optim.SGD(params).step()": anonymous,
        "made.step()": made,  # what a function of the file returns
    }


# -- loaders ---------------------------------------------------------------------------


def test_positional_and_keyword_arguments():
    model = model_of(
        "from torch.utils.data import DataLoader\n"
        "a = DataLoader(ds, 64, True, None, None, 4)\n"
        "b = DataLoader(ds, batch_size=8, num_workers=2)\n"
        "c = DataLoader(*args, **kwargs)\n"
    )
    a, b, c = model.loaders.sites
    assert int_value(a.arg("batch_size")) == 64 and int_value(a.arg("num_workers")) == 4
    assert int_value(b.arg("num_workers")) == 2 and b.arg("pin_memory") is MISSING
    assert a.bound_to == "a" and c.opaque and not a.opaque


def test_loaders_through_helpers_and_self():
    model = model_of(
        "from torch.utils.data import DataLoader\n"
        "def make():\n    return DataLoader(a), DataLoader(b)\n"
        "class T:\n"
        "    def __init__(self):\n        self.train_loader, self.val_loader = make()\n"
        "    def fit(self):\n"
        "        for epoch in range(3):\n"
        "            for x in self.train_loader:\n                pass\n"
        "        for x in self.val_loader:\n            pass\n"
    )
    train, val = model.loaders.sites
    assert train.bound_to == "self.train_loader" and len(train.loops) == 1
    assert model.loaders.epoch(train) is not None and model.loaders.epoch(val) is None


def test_managed_frameworks():
    assert model_of("import lightning as L\n").placement.managed
    assert model_of("from accelerate import Accelerator\n").placement.managed
    assert model_of("from transformers import Trainer\n").placement.managed
    assert not model_of("from transformers import AutoModel\n").placement.managed
    assert not model_of("import torch\n").placement.managed


def test_a_loader_stepped_with_next_feeds_the_loop():
    model = model_of(
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds)\nonce = DataLoader(ds)\n"
        "opt = torch.optim.SGD(params)\n"
        "data_iter = iter(loader)\n"
        "first = next(iter(once))\n"
        "for step in range(100):\n"
        "    x = next(data_iter)\n"
        "    model(x).backward()\n"
        "    opt.step()\n"
    )
    loader, once = model.loaders.sites
    assert loader.feeds_training and not once.feeds_training


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ('kw = {"batch_size": 8}\n', {"batch_size": "8"}),
        ("kw = dict(batch_size=8, **{'shuffle': True})\n", {"batch_size": "8", "shuffle": "True"}),
        (
            'base = {"batch_size": 8}\nkw = dict(base, num_workers=0)\n',
            {"batch_size": "8", "num_workers": "0"},
        ),
        ('kw = {}\nif cuda:\n    kw.update({"pin_memory": True})\n', {"pin_memory": "True"}),
        (
            'kw = {}\nkw["num_workers"] = 2\nkw.setdefault("shuffle", True)\nn = kw.get("x")\n',
            {"num_workers": "2", "shuffle": "True"},
        ),
        # Not readable: the loader is opaque.
        ("kw = load_options()\n", None),
        ("kw = {}\nkw[key] = 2\n", None),
        ("kw = {}\nkw.pop('shuffle')\n", None),
        ("kw = {}\nkw.update(other)\n", None),
        ("kw = {}\nkw.update(shuffle=True)\n", None),
        ("kw = {**a}\n", None),
        ("kw = {}\nkw.update(kw)\n", None),
        ("def make(kw):\n    return DataLoader(ds, **kw)\nkw = {}\n", None),
    ],
)
def test_loader_options_through_a_dict(setup, expected):
    code = "from torch.utils.data import DataLoader\n" + setup
    if "return DataLoader" not in setup:
        code += "loader = DataLoader(ds, **kw)\n"
    (loader,) = model_of(code).loaders.sites
    module = cst.Module([])
    got = (
        None
        if loader.spread is None
        else {k: module.code_for_node(v) for k, v in loader.spread.items()}
    )
    assert got == expected
    assert loader.opaque is (expected is None)
    if expected is not None and "num_workers" in expected:
        assert set_arg(loader, "num_workers", cst.Integer("4")) is None  # would be a TypeError
        assert set_arg(loader, "timeout", cst.Integer("4")) is not None


def test_loader_options_set_on_some_paths():
    code = (
        "from torch.utils.data import DataLoader\n"
        'kw = {"batch_size": 8}\n'
        "if cuda:\n"
        '    kw.update({"num_workers": 1})\n'
        '    kw["pin_memory"] = True\n'
        "    inside = DataLoader(ds, **kw)\n"
        "if big:\n"
        '    other = {"shuffle": True, "batch_size": 4}\n'
        "else:\n"
        '    other = {"batch_size": 2}\n'
        "loader = DataLoader(ds, **kw)\n"
        "second = DataLoader(ds, **other)\n"
    )
    inside, loader, second = model_of(code).loaders.sites
    assert loader.passes("batch_size") and not loader.passes("num_workers")
    assert loader.maybe == {"num_workers", "pin_memory"}
    assert second.passes("batch_size") and not second.passes("shuffle")
    assert inside.passes("num_workers") and inside.passes("pin_memory")  # under the same if


# -- frameworks ------------------------------------------------------------------------

LIGHTNING_FILE = """\
import lightning as L
import pytorch_lightning as pl
from torch.utils.data import DataLoader


class Base(L.LightningModule):
    def training_step(self, batch, batch_idx):
        return self.loss(batch)


class Child(Base):
    pass


class Data(pl.core.LightningDataModule):
    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=64)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=64)


def main():
    loader = DataLoader(ds, batch_size=8)
    trainer = L.Trainer(max_epochs=1)
    trainer.fit(Child(), loader)
    trainer.fit(Child(), datamodule=Data())
    trainer.validate(Child(), DataLoader(ds))
"""


def test_lightning_classes_hooks_and_fits():
    model = model_of(LIGHTNING_FILE)
    frameworks = model.frameworks
    assert [c.node.name.value for c in frameworks.lightning_modules] == ["Base", "Child"]
    assert [c.node.name.value for c in frameworks.data_modules] == ["Data"]
    assert [f.name.value for f in frameworks.training_steps] == ["training_step"]
    assert len(frameworks.trainers) == 1 and len(frameworks.fits) == 2
    trained = [s for s in model.loaders.sites if s.trained_by_framework]
    # the train_dataloader hook's loader, and the one given to fit; not val nor validate
    assert [cst.Module([]).code_for_node(s.call.node.args[0].value) for s in trained] == [
        "self.train_set",
        "ds",
    ]
    assert all(s.trains and not s.feeds_training for s in trained)
    hook, given = trained
    assert hook.starts == frameworks.fits  # every fit of the file may train on it
    assert given.starts == [frameworks.fits[0]]


def test_lightning_cpu_trainers_are_not_gpu_runs():
    cpu = "import lightning as L\nL.Trainer(accelerator='cpu')\n"
    assert model_of(cpu).frameworks.cpu_only and not model_of(cpu).placement.uses_gpu
    mixed = cpu + "L.Trainer(accelerator='gpu')\n"
    assert not model_of(mixed).frameworks.cpu_only and model_of(mixed).placement.uses_gpu
    assert model_of(
        "import lightning as L\n"
    ).placement.uses_gpu  # managed: a GPU where there is one


def test_hugging_face_arguments_trainers_and_train_calls():
    model = model_of(
        "from transformers import Trainer, TrainingArguments\n"
        "from transformers.training_args_seq2seq import Seq2SeqTrainingArguments\n"
        "def build():\n"
        "    return TrainingArguments('out', per_device_train_batch_size=16)\n"
        "args = build()\n"
        "other = Seq2SeqTrainingArguments('out')\n"
        "trainer = Trainer(model, args, train_dataset=ds)\n"
        "trainer.train()\n"
        "Trainer(model=model, args=other).train()\n"
    )
    frameworks = model.frameworks
    first, second = frameworks.training_arguments
    (given,) = frameworks.trainers_given(first)
    assert given.node.args[1].value.value == "args"  # through the helper that returns it
    assert len(frameworks.train_calls([given])) == 1
    assert len(frameworks.trainers_given(second)) == 1
    assert frameworks.training_steps == [] and frameworks.trainers == []


def test_lightning_lookalikes_are_not_lightning():
    model = model_of(
        "from mylib import LightningModule, Trainer\n"
        "class M(LightningModule):\n"
        "    def training_step(self, batch, i):\n"
        "        return batch\n"
        "Trainer().fit(M())\n"
    )
    assert model.frameworks.lightning_modules == [] and model.frameworks.fits == []


@pytest.mark.parametrize(
    ("code", "works"),
    [
        ("ds = load_dataset('imdb').map(tok, batched=True)\nuse(ds['train'])\n", False),
        ("ds = load_dataset('beans').with_transform(aug)\nuse(ds['train'])\n", True),
        ("ds = load_dataset('beans')\nds.set_transform(aug)\nuse(ds['train'])\n", True),
        ("use(datasets.CIFAR10('data'))\n", True),
        ("use(MyImages('data', transform=aug))\n", True),
        ("from data import train\nuse(train)\n", False),
        (
            "class D(torch.utils.data.Dataset):\n"
            "    def __getitem__(self, i):\n"
            "        return tokenizer(self.texts[i])\n"
            "use(D())\n",
            True,
        ),
        (
            "class D(torch.utils.data.Dataset):\n"
            "    def __getitem__(self, i):\n"
            "        return self.rows[i]\n"
            "use(D())\n",
            False,
        ),
    ],
)
def test_works_per_sample(code: str, works: bool):
    model = model_of(
        "import torch\nfrom datasets import load_dataset\nfrom torchvision import datasets\n"
        "from mylib import MyImages\n" + code
    )
    (use,) = [
        c for c in model.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == "use"
    ]
    assert model.datasets.works_per_sample(use.node.args[0].value, use.scope) is works


def test_names_a_fix_may_define_or_import():
    module = model_of(
        "import torch as th\nimport mytools as torch\nimport os\nUSE_BF16 = True\n"
        "def USE_FP16(): ...\n"
    )
    assert module.definable("USE_BF16") and module.definable("NEW")
    assert not module.definable("USE_FP16") and not module.definable("os")
    assert module.imports_plainly("os") and module.imports_plainly("numpy")
    assert not module.imports_plainly("torch") and not module.imports_plainly("USE_BF16")


# -- module settings, conditions, layers ----------------------------------------------


@pytest.mark.parametrize(
    ("code", "found"),
    [
        ("import torch\ntorch.backends.cudnn.benchmark = True\n", ["True"]),
        ("import torch.backends.cudnn as cudnn\ncudnn.benchmark = flag\n", ["flag"]),
        ("from torch.backends import cudnn\ndef f():\n    cudnn.benchmark = False\n", ["False"]),
        ("import torch as T\na = T.backends.cudnn.benchmark = b = True\n", ["True"]),
        # not the module attribute: a local object, a shadowed name, an unpacking
        ("class C: pass\ncudnn = C()\ncudnn.benchmark = True\n", []),
        ("import torch\ndef f(torch):\n    torch.backends.cudnn.benchmark = True\n", []),
        ("import torch\ntorch.backends.cudnn.benchmark, x = True, 1\n", []),
    ],
)
def test_stores_to_module_attributes(code, found):
    model = model_of(code)
    stores = model.stores_to("torch.backends.cudnn.benchmark")
    assert [model.module.code_for_node(s.value) for s in stores] == found


def test_conditional_statements():
    model = model_of(
        "import torch\n"
        "torch.a = 1\n"
        "if args.debug:\n    torch.b = 1\n"
        "if torch.cuda.is_available():\n    torch.g = 1\n"
        'if __name__ == "__main__":\n    torch.c = 1\n'
        "def debug():\n    torch.d = 1\n"
        "def setup():\n    torch.e = 1\n"
        "def never_called():\n    torch.f = 1\n"
        "if args.debug:\n    debug()\n"
        "setup()\n"
    )
    conditional = {
        s.qualname: model.runs.conditional(s.ctx)
        for s in model.stores_to(*(f"torch.{n}" for n in "abcdefg"))
    }
    assert conditional == {
        "torch.a": False,
        "torch.b": True,
        "torch.c": False,
        "torch.d": True,
        "torch.e": False,
        "torch.f": False,
        "torch.g": False,
    }


def test_layers_and_convolutional_networks():
    model = model_of(
        "import torch.nn as nn\n"
        "import torchvision\n"
        "def block(i, o):\n"
        "    return [nn.Conv2d(i, o, 3), nn.BatchNorm2d(o)]\n"
        "class Base(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.head = nn.Linear(8, 2)\n"
        "class Net(Base):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        def inner():\n"
        "            return nn.GRU(4, 4)\n"
        "        self.body = nn.Sequential(*block(3, 8), inner())\n"
        "class Mlp(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(4, 4)\n"
        "net = Net()\n"
        "mlp = Mlp()\n"
        "seq = nn.Sequential(nn.Conv1d(1, 2, 3))\n"
        "resnet = torchvision.models.resnet18()\n"
        "vit = torchvision.models.vit_b_16()\n"
        "class Pair(nn.Module):\n"
        "    def __init__(self, encoder, head):\n"
        "        super().__init__()\n"
        "        self.encoder, self.head = encoder, head\n"
        "pair = Pair(seq, mlp)\n"
    )
    sites = {site.name: site for site in model.models.sites}
    assert model.networks.layers(sites["net"]) == {
        "Conv2d",
        "BatchNorm2d",
        "GRU",
        "Sequential",
        "Linear",
    }
    convolutional = {n: model.networks.convolutional(s) for n, s in sites.items() if "." not in n}
    assert convolutional == {
        "net": True,
        "mlp": False,
        "seq": True,
        "resnet": True,
        "vit": False,
        "pair": True,
    }


def test_trained_on_gpu_and_reduced_precision():
    code = (
        "import torch\nimport torch.nn as nn\n"
        "gpu = nn.Linear(2, 2).cuda()\ncpu = nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD([*gpu.parameters(), *cpu.parameters()], lr=0.1)\n"
        "for x in data:\n"
        "    loss = gpu(x).sum() + cpu(x).sum()\n    loss.backward()\n    opt.step()\n"
    )
    model = model_of(code)
    assert [s.name for s in model.trained_on_gpu] == ["gpu"]
    assert not model.workload.reduced_precision
    assert model_of(code + "y = x.to(torch.bfloat16)\n").workload.reduced_precision
    assert model_of(code + "scaler = torch.amp.GradScaler()\n").workload.reduced_precision


def test_a_model_is_kept_on_the_cpu_where_the_device_reaching_its_move_is_the_cpu():
    """At a notebook's top level a move reads the `device` its last assignment before it
    gave (the CPU in an early cell, CUDA in a later one); a model never moved is forgotten
    on the CPU, not kept there; a device chosen under a condition is not known."""
    module = model_of(
        "import torch\n"
        "device = torch.device('cpu')\n"
        "first = torch.nn.Linear(8, 8).to(device)\n"
        "never = torch.nn.Linear(8, 8)\n"
        "device = torch.device('cuda')\n"
        "second = torch.nn.Linear(8, 8).to(device)\n"
        "if fast:\n"
        "    chosen = 'cpu'\n"
        "else:\n"
        "    chosen = 'cuda'\n"
        "third = torch.nn.Linear(8, 8).to(chosen)\n"
    )
    scope = module.facts.scope
    kept = {
        n: module.placement.kept_on_cpu(module.models.of(cst.Name(n), scope))
        for n in ("first", "never", "second", "third")
    }
    assert kept == {"first": True, "never": False, "second": False, "third": False}
