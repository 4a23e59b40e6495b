"""The fixed program is checked before it is written (torchlint.lint.gate, Linter.fix): a fix
that would read a name before anything binds it, mix tabs and spaces or stop the file
compiling is repaired or left out, and its finding says why; fixes of findings that only
other fixes brought about are counted."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from torchlint.fixes import Applicability, FixSafety, InsertAfter, Remove, Replace, fix, statements
from torchlint.lint.gate import Gate, apply_checked
from torchlint.lint.linter import Linter
from torchlint.rule import Diagnostic, Rule
from torchlint.semantic import TorchModule

from .conftest import run_cli


class _Calls(Rule):
    """Replaces each call of `old_api(...)` with `torch.new_api(...)` (reported as TL502
    for the noqa codes), removing `from legacy import old_api` with it."""

    code = "TL502"
    name = "calls"
    fix_safety = FixSafety.SAFE
    tokens = ("old_api",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        imports = [s for s in module.module.body if "legacy" in module.module.code_for_node(s)]
        for call in module.calls:
            if call.qualname != "legacy.old_api":
                continue
            new = call.node.with_changes(func=cst.parse_expression("torch.new_api"))
            edits = [Replace(call.node, new), *(Remove(s) for s in imports)]
            yield self.diagnostic(
                call.node, "old API", fix("Use the new API", Applicability.SAFE, *edits)
            )


def test_a_use_before_the_import_gets_the_import_early():
    """`torch` is imported, but only below the code the fix writes (a later notebook
    cell, say): the import goes to the import block too."""
    source = "from legacy import old_api\nx = old_api()\nimport torch\n"
    outcome = Linter([_Calls()]).fix(source)
    assert outcome.text == "import torch\n\nx = torch.new_api()\nimport torch\n"
    assert outcome.fixed == ["TL502"] and outcome.remaining == []


def test_a_fix_that_needs_an_unbound_name_is_left_out_and_says_why():
    source = "from legacy import old_api\nx = old_api()\n"
    outcome = Linter([_Calls()]).fix(source)
    assert outcome.text == source and outcome.fixed == []
    [finding] = outcome.remaining
    assert finding.message == "old API (not fixed: it would read `torch` before anything binds it)"
    assert finding.fix is None


def test_an_import_several_fixes_remove_is_removed_once_or_kept():
    source = "import torch\nfrom legacy import old_api\nx = old_api()\ny = old_api()\n"
    both = Linter([_Calls()]).fix(source)
    assert both.text == "import torch\nx = torch.new_api()\ny = torch.new_api()\n"
    assert both.fixed == ["TL502", "TL502"]
    # One call stays (noqa): the other's fix keeps the import its removal would unbind.
    kept = Linter([_Calls()]).fix(source.replace("y = old_api()", "y = old_api()  # noqa"))
    assert kept.text == (
        "import torch\nfrom legacy import old_api\nx = torch.new_api()\ny = old_api()  # noqa\n"
    )


class _Wraps(Rule):
    """Inserts a statement indented with four spaces after each DataLoader call's line."""

    code = "TL201"
    name = "wraps"
    fix_safety = FixSafety.SAFE
    tokens = ("DataLoader",)

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        if "y = [" in module.module.code:
            return
        for loader in module.loaders.sites:
            line = statements("y = [\n    1,\n]\n")
            yield self.diagnostic(
                loader.call.node,
                "wrap",
                fix("Wrap", Applicability.SAFE, InsertAfter(loader.call.ctx.statement, line)),
            )


def test_line_breaks_a_fix_adds_follow_the_files_indentation():
    source = "from torch.utils.data import DataLoader\n\ndef f():\n\tx = DataLoader(ds)\n"
    outcome = Linter([_Wraps()]).fix(source)
    assert outcome.text.endswith("\tx = DataLoader(ds)\n\ty = [\n\t\t1,\n\t]\n")


def test_the_gate_compares_with_the_text_before_the_pass():
    gate = Gate("print(missing)\n")
    names = frozenset({"missing", "other"})  # what the fixes mention: only they are counted
    assert not gate.problems("print(missing)\nprint(1)\n", names)
    assert gate.problems("print(missing, other)\n", names).names == {"other"}
    assert not gate.problems("print(missing, other)\n", frozenset({"missing"}))
    assert gate.problems("if x:\n\ty = (\n\t    1)\n", names).mixed
    assert gate.problems("f(a=1, a=2)\n", names).unparsable
    assert not Gate("def f(:\n").problems("def f(:\n    pass\n", names)  # newer syntax


class _Enables(Rule):
    """TL402 removes `drop()` calls; TL403 reports `keep()` once no `drop()` is left."""

    code = "TL402"
    name = "enables"
    fix_safety = FixSafety.SAFE
    tokens = ("drop", "keep")

    def check(self, module: TorchModule) -> Iterator[Diagnostic]:
        drops = [c for c in module.calls if _called(c.node) == "drop"]
        for call in drops:
            yield self.diagnostic(
                call.node, "drop", fix("Remove", Applicability.SAFE, Remove(call.ctx.statement))
            )
        for call in module.calls:
            if _called(call.node) == "keep" and not drops:
                new = call.node.with_changes(func=cst.Name("kept"))
                yield Diagnostic(
                    "TL403",
                    "keep",
                    call.node,
                    fix("Rename", Applicability.SAFE, Replace(call.node, new)),
                )


def _called(call: cst.Call) -> str | None:
    return call.func.value if isinstance(call.func, cst.Name) else None


def test_fixes_of_findings_other_fixes_brought_about_are_counted():
    outcome = Linter([_Enables()]).fix("def kept():\n    pass\ndrop()\nkeep()\n")
    assert outcome.fixed == ["TL402", "TL403"]
    assert outcome.later == ["TL403"]


DETERMINISTIC = """\
import torch
import torch.nn as nn

torch.backends.cudnn.deterministic = True
model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.LazyLinear(10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.randn(8, 3, 32, 32, device="cuda")).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_fix_says_which_fixes_check_did_not_show(tmp_path):
    """TL601 is silent while the file asks for deterministic kernels; once TL602 removes
    that, it is found: the real command says so, and lists it."""
    (tmp_path / "train.py").write_text(DETERMINISTIC)
    args = ("--no-cache", "--preview", "--select", "TL601,TL602", "--unsafe-fixes", "train.py")
    checked = run_cli("check", "--output-format", "concise", *args, cwd=tmp_path)
    assert [line.split()[1] for line in checked.stdout.splitlines()[:-2]] == ["TL602"]
    fixed = run_cli("fix", "--show-fixes", *args, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "    1 x TL601 (cudnn-benchmark-off), 1 found only after other fixes\n" in fixed.stdout
    assert fixed.stdout.endswith(
        "Found 2 problems (2 fixed, 0 remaining; 1 found only after other fixes).\n"
    )


def test_apply_checked_tries_the_suspects_alone():
    module = cst.parse_module("from legacy import old_api\nx = old_api()\nimport torch\n")
    found = list(_Calls().check(_model(module)))
    checked = apply_checked(module, [d.fix for d in found if d.fix], Gate(module.code))
    assert checked.refused == []
    [(proposed, applied)] = checked.applied
    assert applied is not proposed and [i.module for i in applied.imports] == ["torch"]


def _model(module: cst.Module) -> TorchModule:
    from torchlint.semantic import Settings, build

    return build(module, "t.py", Settings())
