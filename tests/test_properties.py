"""Property-based: generated training scripts, every rule on, unsafe fixes applied.

Scripts mix DataLoader calls (random arguments, order, aliases, comments and line breaks
inside the call, `**kwargs`), model moves, tensor factories, training loops with AMP,
syncs and accumulation, indented with spaces or tabs. Whatever the mix: the fixed code
parses and compiles, a second fix changes nothing, no call gets an argument twice, no
import or definition is added twice, no name is read before anything binds it that was
not already, and no line mixes tabs and spaces.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import Counter

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchlint.config.load import expand, instantiate, load_config
from torchlint.lint.linter import Linter, LintError
from torchlint.lint.undefined import mixed_indentation, undefined_names

LINTER = Linter(instantiate(expand(["ALL"])), load_config(None).settings())

IMPORTS = {
    "plain": ("import torch\nfrom torch.utils.data import DataLoader\n", "DataLoader"),
    "alias": ("import torch as T\nfrom torch.utils.data import DataLoader as DL\n", "DL"),
    "module": ("import torch\nfrom torch.utils import data\n", "data.DataLoader"),
    "dotted": ("import torch\nimport torch.utils.data as tud\n", "tud.DataLoader"),
    "full": ("import torch\nimport torch.utils.data\n", "torch.utils.data.DataLoader"),
}
KWARGS = {
    "batch_size": ["1", "2", "32", "BATCH", "args.batch_size"],
    "shuffle": ["True", "False"],
    "num_workers": ["0", "2", "WORKERS", "os.cpu_count()"],
    "pin_memory": ["True", "False", "torch.cuda.is_available()"],
    "persistent_workers": ["True", "False"],
    "drop_last": ["True"],
    "prefetch_factor": ["2", "4"],
    "collate_fn": ["collate"],
    "sampler": ["sampler", "DistributedSampler(ds)"],
}


@st.composite
def dataloader_call(draw, name: str) -> str:
    keys = draw(st.lists(st.sampled_from(sorted(KWARGS)), unique=True, max_size=5))
    first = draw(st.sampled_from(["ds", "dataset=ds", "make_dataset(split='train')"]))
    args = [first] + [f"{k}={draw(st.sampled_from(KWARGS[k]))}" for k in keys]
    if first == "ds" and draw(st.booleans()) and len(args) > 1:  # batch_size positionally
        args = ["ds", "16", *[a for a in args[1:] if not a.startswith("batch_size=")]]
    if draw(st.integers(0, 9)) == 0:
        args.append("**extra")
    layout = draw(st.sampled_from(["line", "per-line", "comments", "broken"]))
    if layout == "line":
        return f"{name}({', '.join(args)})"
    if layout == "per-line":
        trailing = "," if draw(st.booleans()) else ""
        return f"{name}(\n    " + ",\n    ".join(args) + f"{trailing}\n)"
    if layout == "comments":
        return f"{name}(  # loader\n    " + ",  # c\n    ".join(args) + ",  # last\n)"
    cut = draw(st.integers(1, len(args)))
    return f"{name}({', '.join(args[:cut])},\n        {', '.join(args[cut:])})".replace(
        ",\n        )", ")"
    )


MODEL = [
    "model = nn.Linear(8, 1)\n",
    "model = nn.Linear(8, 1).cuda()\n",
    "model = nn.Linear(8, 1)\nmodel.to(device)\n",
    "model = nn.Linear(8, 1).to(device)\nmodel = torch.nn.DataParallel(model)\n",
]
PRELUDE = [
    "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n",
    "device = 'cuda'\n",
    "scaler = torch.cuda.amp.GradScaler()\n",
    "mask = torch.zeros(4, 8).cuda()\n",
    "state = torch.load('ckpt.pt')\n",
    "BATCH = 4\n",
]
STEP = [
    "x, y = x.to(device), y.to(device)\n",
    "x = x.cuda(non_blocking=True)\n",
    "optimizer.zero_grad()\n",
    "optimizer.zero_grad(set_to_none=False)\n",
    "loss = nn.functional.mse_loss(model(x), y)\n",
    "with torch.cuda.amp.autocast():\n    loss = (model(x) - y).pow(2).mean()\n",
    "loss.backward()\n",
    "optimizer.step()\n",
    "total += loss\n",
    "print(loss.item())\n",
    "torch.cuda.empty_cache()\n",
    "ids = torch.arange(16).to(device)  # noqa: TL104\n",
]


@st.composite
def script(draw) -> str:
    header, name = IMPORTS[draw(st.sampled_from(sorted(IMPORTS)))]
    lines = [header, "import torch.nn as nn\n"]
    if draw(st.booleans()):
        lines.insert(0, '"""A training script."""\n')
    if draw(st.booleans()):
        lines.append("import os\n")
    if draw(st.booleans()):
        lines.append("from torch.utils.data.distributed import DistributedSampler\n")
    lines += draw(st.lists(st.sampled_from(PRELUDE), unique=True, max_size=4))
    lines.append(draw(st.sampled_from(MODEL)))
    lines.append("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n")
    for i in range(draw(st.integers(1, 3))):
        call = draw(dataloader_call(name))
        shape = draw(st.sampled_from(["{}", "{}  # noqa: TL201", "wrap({})", "[{}][0]"]))
        lines.append(f"loader{i} = {shape.format(call)}\n")
    body = "".join(draw(st.lists(st.sampled_from(STEP), min_size=1, max_size=8)))
    training = "for epoch in range(2):\n    total = 0\n    for x, y in loader0:\n"
    training += "".join(f"        {line}\n" for line in body.splitlines())
    if draw(st.booleans()):
        training = "def train():\n" + "".join(f"    {line}\n" for line in training.splitlines())
    lines.append(training)
    text = "".join(lines)
    if draw(st.booleans()):
        text = text.replace("    ", "\t")
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if "import torch as T" in header:  # the alias everywhere but in the imports
        text = "".join(
            line if line.startswith(("import", "from")) else line.replace("torch.", "T.")
            for line in text.splitlines(keepends=True)
        )
    return text


def _duplicate_arguments(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            names = [k.arg for k in node.keywords if k.arg is not None]
            found += [n for n, c in Counter(names).items() if c > 1]
    return found


def _top_level_bindings(tree: ast.Module) -> Counter[str]:
    """Imports and definitions at the top level; `model = model.to(device)` (a name rebound
    from itself, as TL102's fix does) defines nothing new."""
    bound: Counter[str] = Counter()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(f"import {a.asname or a.name}" for a in node.names)
        elif isinstance(node, ast.Assign):
            read = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            bound.update(t.id for t in node.targets if isinstance(t, ast.Name) and t.id not in read)
    return bound


@pytest.mark.slow
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(script(), st.booleans())
def test_fixes_parse_are_idempotent_and_never_duplicate(source, tabs):
    if tabs:
        source = re.sub(r"(?m)^(?:    )+", lambda m: "\t" * (len(m.group()) // 4), source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        original = ast.parse(source)
        assert ("\r\n" in source) == ("\r\n" in LINTER.fix(source, "gen.py").text)
    try:
        once = LINTER.fix(source, "gen.py", unsafe=True).text
    except LintError as exc:
        raise AssertionError(f"fix failed: {exc}\n---\n{source}") from None
    cst.parse_module(once)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(once, "gen.py", "exec", dont_inherit=True)
        fixed = ast.parse(once)
    assert not _duplicate_arguments(fixed), once
    before, after = _top_level_bindings(original), _top_level_bindings(fixed)
    grown = [k for k, n in after.items() if n > 1 and n > before.get(k, 0)]
    assert not grown, f"added twice: {grown}\n---\n{once}"
    twice = LINTER.fix(once, "gen.py", unsafe=True).text
    assert twice == once, f"second fix changed:\n{once}\n---\n{twice}"
    unbound = Counter(n for n, _ in undefined_names(once) or ())
    unbound -= Counter(n for n, _ in undefined_names(source) or ())
    assert not unbound, f"read before bound: {unbound}\n---\n{once}"
    assert mixed_indentation(once) <= mixed_indentation(source), once
