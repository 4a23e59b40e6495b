"""Each rule's docstring examples run as tests: its `Bad:` example is reported by the
rule, its `Good:` examples are not, through the linter with only that rule selected
(TL904: with the rules the example's comments name; preview on, low-impact findings
shown).

An example is read as a script written with the usual imports of the names it uses and
does not import itself (`torch`, `nn`, `DataLoader`, `TrainingArguments`...: IMPORTS);
everything else the rule needs to see (a GPU, a training loop) the example writes out.
"""

from __future__ import annotations

import ast

import pytest

from torchlint.config.load import Config, default_options, instantiate
from torchlint.docs import Example, examples
from torchlint.lint.linter import Linter
from torchlint.lint.registry import builtin_rules

from .conftest import ROOT, selection

IMPORTS = {
    "torch": "import torch",
    "nn": "from torch import nn",
    "DataLoader": "from torch.utils.data import DataLoader",
    "DistributedSampler": "from torch.utils.data import DistributedSampler",
    "DDP": "from torch.nn.parallel import DistributedDataParallel as DDP",
    "torchvision": "import torchvision",
    "resnet50": "from torchvision.models import resnet50",
    "TrainingArguments": "from transformers import TrainingArguments",
    "Trainer": "from transformers import Trainer",
    "AutoModelForCausalLM": "from transformers import AutoModelForCausalLM",
    "LoraConfig": "from peft import LoraConfig",
    "get_peft_model": "from peft import get_peft_model",
    "load_dataset": "from datasets import load_dataset",
    "L": "import lightning as L",
    "pl": "import pytorch_lightning as pl",
    "os": "import os",
    "contextlib": "import contextlib",
}
CASES = [
    pytest.param(code, example, id=f"{code}-{example.heading}")
    for code, rule in builtin_rules().items()
    for example in examples(rule)
]


def program(code: str) -> str:
    """The example with the imports of the names it reads but does not import."""
    tree = ast.parse(code)
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    read = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    lines = [line for name, line in IMPORTS.items() if name in read - imported]
    return "\n".join(lines) + "\n\n" + code if lines else code


def reported(code: str, example: Example) -> list[str]:
    codes = selection(code, example.code)
    config = Config(
        root=ROOT, select=codes, preview=True, min_impact="low", options=default_options()
    )
    assert config.selected_codes() == codes
    linter = Linter(instantiate(codes), config.settings(), low_impact=config.low_impact)
    found = linter.lint(program(example.code), f"{code.lower()}_example.py")
    return [f"{v.line}: {v.message}" for v in found if v.code == code]


@pytest.mark.parametrize("code", list(builtin_rules()))
def test_every_rule_shows_bad_and_good_code(code: str):
    kinds = {example.bad for example in examples(builtin_rules()[code])}
    assert True in kinds, f"{code}'s docstring has no `Bad:` example"
    assert False in kinds, f"{code}'s docstring has no `Good:` example"


@pytest.mark.parametrize(("code", "example"), CASES)
def test_example(code: str, example: Example):
    compile(program(example.code), f"{code} {example.heading}", "exec")
    found = reported(code, example)
    if example.bad:
        assert found, f"{code} does not report its {example.heading} example"
    else:
        assert not found, f"{code} reports its {example.heading} example: {found}"


def test_imports_are_added_for_the_names_an_example_reads_only():
    assert program("import os\nmodel = nn.Linear(2, 2)\nos.getcwd()\n") == (
        "from torch import nn\n\nimport os\nmodel = nn.Linear(2, 2)\nos.getcwd()\n"
    )
    assert program("x = 1\n") == "x = 1\n"
