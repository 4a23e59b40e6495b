"""`torchlint verify --profile`: PyTorch's run-time anti-patterns joined with the findings.

The join (crosscheck.py) on profiles written by hand, the CUDA-only patterns included;
the child side (matcher.py) on events shaped like torch's; and real runs with torch on
the CPU: the bundled examples and tests/profile/edge_cases.py, few steps each."""

from __future__ import annotations

import io
import json
import re
import shutil
import textwrap
from pathlib import Path
from types import SimpleNamespace

import libcst as cst
import pytest

from torchlint.config.load import instantiate
from torchlint.lint.linter import Linter
from torchlint.lint.noqa import parse_suppressions
from torchlint.lint.registry import all_rules
from torchlint.results import Violation
from torchlint.semantic import build
from torchlint.verify import command, crosscheck, matcher, patterns, profile_report
from torchlint.verify.options import VerifyOptions

from .conftest import ROOT, needs_the_profiler_matcher, run_cli

EXAMPLES = ROOT / "examples"
SCRIPT = "/work/train.py"  # the path the hand-written profiles name
NO_RULE = "no torchlint rule for this pattern"

# -- the rule <-> pattern table -------------------------------------------------------


def test_the_table_names_real_rules_and_every_pattern_once():
    assert [p.cls for p in patterns.PATTERNS] == list(matcher.PATTERNS)
    codes = [c for p in patterns.PATTERNS for c in p.rules]
    assert len(codes) == len(set(codes))
    assert set(codes) <= set(all_rules())
    assert {p.cls for p in patterns.PATTERNS if p.cuda} == matcher.CUDA_ONLY


def test_the_docs_show_the_table():
    docs = (ROOT / "docs" / "verify.md").read_text()
    assert patterns.markdown_table() in docs


# -- the join, on profiles written by hand -----------------------------------------------


def profile(matches: dict, lines=(), loading=(), cuda=False, **states) -> dict:
    """A profile as matcher.py reports it; `matches`: class -> [(lines, count, ns)]."""
    patterns = {name: {"matches": []} for name in matcher.PATTERNS}
    for name, found in matches.items():
        patterns[name]["matches"] = [
            {"frames": [[SCRIPT, line] for line in frames], "count": count, "ns": ns}
            for frames, count, ns in found
        ]
    for name, state in states.items():
        patterns[name].update(state)
    return {
        "torch": "2.13.0",
        "cuda": cuda,
        "steps": 20,
        "span_ns": 10**9,
        "lines": sorted(lines),
        "loading": [
            {"frames": [[SCRIPT, line] for line in frames], "count": 1, "ns": ns}
            for frames, ns in loading
        ],
        "patterns": patterns,
    }


def join(code: str, found: dict, select=None):
    code = textwrap.dedent(code)
    codes = select or list(all_rules())
    violations = Linter(instantiate(codes)).lint(code, SCRIPT)
    module = build(cst.parse_module(code), SCRIPT)
    return crosscheck.join(
        found, violations, module, SCRIPT, codes, parse_suppressions(code).suppressed
    )


def status(check, code: str) -> list[tuple[int, str]]:
    return [(f.line, f.status) for f in check.findings if f.code == code]


GPU_SCRIPT = """\
import torch
from torch.utils.data import DataLoader, Dataset
class Images(Dataset):
    def __getitem__(self, i):
        return torch.randn(3, 8, 8).clamp(0, 1)
train = DataLoader(Images(), batch_size=64)
val = DataLoader(Images(), batch_size=64, pin_memory=True)
model = torch.nn.Linear(8, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
if __name__ == "__main__":
    for epoch in range(10):
        for x in train:
            noise = torch.zeros(64, 8).cuda()
            opt.zero_grad(set_to_none=False)
            model(x.cuda(non_blocking=True) + noise).sum().backward()
            opt.step()
        for x in zip(val, train):
            pass
"""


def test_findings_are_confirmed_by_entity_not_by_line():
    check = join(
        GPU_SCRIPT,
        profile(
            {
                "SynchronizedDataLoaderPattern": [([12], 10, 500)],
                "GradNotSetToNonePattern": [([14], 19, 300)],
                "OptimizerSingleTensorPattern": [([16], 20, 700)],
            },
            lines=range(1, 18),
            loading=[([12], 25 * 10**7)],
        ),
    )
    assert status(check, "TL201") == [(6, "confirmed")]  # not val: it does not train
    (train,) = (f for f in check.findings if f.code == "TL201")
    assert train.entity == "DataLoader `train` (line 6)" and train.count == 10
    assert train.ns == 25 * 10**7  # the time of its batches, not of starting its passes
    assert "25.0%" in profile_report.render(check)
    assert status(check, "TL405") == [(14, "confirmed")]
    tl405 = next(f for f in check.findings if f.code == "TL405")
    assert tl405.entity == "optimizer `opt` (line 9)" and tl405.count == 19
    # TL605 at the constructor, PyTorch at `opt.step()`: the same optimizer.
    assert status(check, "TL605") == [(9, "confirmed")] and not check.runtime_only
    tl605 = next(f for f in check.findings if f.code == "TL605")
    assert tl605.entity == "optimizer `opt` (line 9)" and tl605.count == 20
    assert tl605.detail == "matched at train.py:16"
    # Not checkable: no pattern, or a CUDA-only one on a run without a GPU.
    tl104 = next(f for f in check.findings if f.code == "TL104")
    assert tl104.status == "not checkable" and "used no GPU" in tl104.detail
    assert next(f for f in check.findings if f.code == "TL202").status == "not checkable"


def test_cuda_patterns_join_on_a_gpu_run():
    check = join(
        GPU_SCRIPT,
        profile(
            {
                "ExtraCUDACopyPattern": [([13], 20, 900)],
                "FP32MatMulPattern": [([15], 40, 5000)],
                "MatMulDimInFP16Pattern": [([15], 40, 5000)],
            },
            lines=range(1, 18),
            cuda=True,
        ),
    )
    assert status(check, "TL104") == [(13, "confirmed")]
    (tl503,) = (f for f in check.findings if f.code == "TL503")  # one setting: the script
    assert (tl503.status, tl503.entity, tl503.count) == ("confirmed", "the script", 40)
    where = {r.pattern: (r.entity, r.why) for r in check.runtime_only}
    assert where == {"MatMulDimInFP16Pattern": ("model `model` (line 8)", NO_RULE)}
    assert not any("used no GPU" in n for n in check.notes)


def test_what_the_run_cannot_tell():
    check = join(
        GPU_SCRIPT,
        profile(
            {},
            lines=[1, 2, 6, 7, 8, 9],  # built, never iterated: the run stopped before
            GradNotSetToNonePattern={"error": "AssertionError: boom"},
        ),
    )
    assert status(check, "TL201") == [(6, "not seen")]
    tl201 = next(f for f in check.findings if f.code == "TL201")
    assert tl201.detail == "it did not run in the profiled steps"
    tl405 = next(f for f in check.findings if f.code == "TL405")
    assert tl405.status == "not checkable" and "AssertionError: boom" in tl405.detail
    assert "GradNotSetToNonePattern failed: AssertionError: boom" in check.notes
    check = join(GPU_SCRIPT, profile({}, lines=range(1, 18)))
    tl201 = next(f for f in check.findings if f.code == "TL201")
    assert tl201.detail == "it ran, and PyTorch's matcher did not see the pattern"
    # Not seen clears nothing where the pattern finds less than the rule.
    tl605 = next(f for f in check.findings if f.code == "TL605")
    assert tl605.status == "not seen" and "a foreach optimizer" in tl605.detail


def test_why_a_pattern_has_no_finding():
    code = """\
    import torch
    from torch.utils.data import DataLoader
    from helpers import Images, normalize
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(Images(transform=normalize), batch_size=64)  # noqa: TL201
    other = DataLoader(Images(transform=normalize), batch_size=64)
    model = torch.nn.Linear(8, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    def run(source):
        for x in source:
            model(x.to(device)).sum().backward()
            opt.step()
    run(loader)
    run(other)
    """
    found = profile(
        {
            "SynchronizedDataLoaderPattern": [([10, 13], 1, 10), ([10, 14], 1, 10)],
            "GradNotSetToNonePattern": [([], 3, 10)],
        },
        lines=range(1, 15),
    )
    found["patterns"]["GradNotSetToNonePattern"]["matches"][0]["frames"] = [
        ["/usr/lib/python3/site-packages/helpers/train.py", 7],
        [SCRIPT, 13],
    ]
    check = join(code, found)
    rows = {(r.entity, r.why) for r in check.runtime_only}
    # A loop in a function over what its callers pass: both loaders start passes there.
    assert ("DataLoader `loader` (line 5)", "suppressed by a noqa comment on line 5") in rows
    assert status(check, "TL201") == [(6, "confirmed")]
    outside = next(r for r in check.runtime_only if r.pattern == "GradNotSetToNonePattern")
    assert outside.entity is None and outside.where.endswith("helpers/train.py:7")
    assert outside.why == "outside the script (joined here with the script's own findings)"
    # A rule left out of the selection.
    check = join(code, found, select=["TL202"])
    assert ("DataLoader `other` (line 6)", "TL201 not selected") in {
        (r.entity, r.why) for r in check.runtime_only
    }


LEFT_ALONE = """\
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset
class Images(Dataset):
    def __getitem__(self, i):
        return torch.randn(3, 8, 8).clamp(0, 1)
class Stream(IterableDataset):
    def __iter__(self):
        yield torch.randn(3, 8, 8).clamp(0, 1)
device = "cuda"
loader = DataLoader({dataset}, batch_size=64)
model = torch.nn.Linear(8, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in loader:
    model(x.to(device)).sum().backward()
    {step}
"""


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({'"cuda"': '"cpu"'}, "the script trains on no GPU"),
        ({"{dataset}": "torch.utils.data.TensorDataset(torch.randn(64, 8))"}, "its dataset "
         "does no work per sample (tensors in memory)"),
        ({"{dataset}": "Stream()"}, "its dataset is an IterableDataset"),
        ({"{step}": "pass"}, "no training loop of the file iterates it"),
        ({"{dataset}, batch_size=64": "*args"}, "its options come from `*args` or a `**` "
         "dict the file does not show"),
        ({}, "reported nothing here (a recall gap)"),
    ],
)  # fmt: skip
def test_a_loader_the_rule_leaves_alone_says_why(changes, why):
    """PyTorch's pattern fires on every loader without workers; TL201 by design only
    where workers pay off. A loader it leaves alone is not a recall gap."""
    code = LEFT_ALONE
    for old, value in [*changes.items(), ("{dataset}", "Images()"), ("{step}", "opt.step()")]:
        code = code.replace(old, value)
    found = profile({"SynchronizedDataLoaderPattern": [([13], 1, 10)]}, lines=range(1, 16))
    if changes:
        check = join(code, found)
    else:  # TL201 finds it: leave its finding out, as a rule that missed it would
        module = build(cst.parse_module(code), SCRIPT)
        check = crosscheck.join(found, [], module, SCRIPT, list(all_rules()))
    assert not [f for f in check.findings if f.code == "TL201"]
    (row,) = check.runtime_only
    assert row.entity == "DataLoader `loader` (line 10)"
    assert row.why == (f"TL201 leaves it alone: {why}" if changes else f"TL201 {why}")


def test_an_optimizer_of_a_cpu_script_is_left_alone_by_tl605():
    code = LEFT_ALONE.replace('"cuda"', '"cpu"').replace("{dataset}", "Images()")
    code = code.replace("{step}", "opt.step()")
    found = profile({"OptimizerSingleTensorPattern": [([15], 1, 10)]}, lines=range(1, 16))
    (row,) = join(code, found).runtime_only
    assert (row.entity, row.why) == (
        "optimizer `opt` (line 12)",
        "TL605 leaves it alone: the script trains on no GPU",
    )
    # Not so for TL405 on the same optimizer: it applies on the CPU too.
    found = profile({"GradNotSetToNonePattern": [([15], 1, 10)]}, lines=range(1, 16))
    module = build(cst.parse_module(code), SCRIPT)
    (row,) = crosscheck.join(found, [], module, SCRIPT, list(all_rules())).runtime_only
    assert row.why == "TL405 reported nothing here (a recall gap)"


def test_the_headline_says_what_was_profiled():
    code = "import torch\nw = torch.zeros(3, requires_grad=True)\n"
    found = profile({}, lines=[2])
    assert "train.py: 20 optimizer step(s) profiled (1.00 s)" in profile_report.render(
        join(code, found)
    )
    found["steps"] = 0  # a script without an optimizer: profiled to its end
    assert "train.py: no optimizer step, the run profiled (1.00 s), torch 2.13.0, CPU only" in (
        profile_report.render(join(code, found))
    )


def test_a_conv_layer_is_preferred_on_a_line_calling_several():
    code = """\
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.bn = nn.BatchNorm2d(8)
        def forward(self, x):
            return self.bn(self.conv(x))
    """
    check = join(
        code, profile({"Conv2dBiasFollowedByBatchNorm2dPattern": [([8], 4, 10)]}, range(1, 9))
    )
    (tl603,) = check.findings
    assert (tl603.code, tl603.status) == ("TL603", "confirmed") and not check.runtime_only
    assert tl603.entity == "model `self.conv` (line 5)"


def test_a_rule_reporting_at_a_constructor_joins_the_same_entity():
    """TL605 and TL603 report an optimizer and a conv bias where they are built; PyTorch
    reports them at `step()` and in `forward`."""
    code = """\
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.bn = nn.BatchNorm2d(8)
        def forward(self, x):
            return self.bn(self.conv(x))
    model = Net()
    opt = torch.optim.Adam(
        model.parameters(), lr=1e-3
    )
    for x in data:
        model(x).sum().backward()
        opt.step()
    """
    code = textwrap.dedent(code)
    entities = crosscheck.Entities(build(cst.parse_module(code), SCRIPT))
    by_class = {p.cls: p for p in patterns.PATTERNS}
    single = by_class["OptimizerSingleTensorPattern"]
    conv = by_class["Conv2dBiasFollowedByBatchNorm2dPattern"]
    at = [
        Violation("TL9xx", "x", "x", line, column, line, column)
        for line, column in ((11, 7), (6, 21))
    ]
    assert entities.of_finding(single, at[0]) == entities.of_frames(single, [16])[0]
    assert entities.of_finding(conv, at[1]) == entities.of_frames(conv, [9, 15])[0]
    assert entities.of_frames(conv, [9, 15])[0].label == "model `self.conv` (line 6)"


# -- the child side, on events shaped like torch's ------------------------------------------


def event(name, caller=None, parent=None, inputs=(), tag="PyCall"):
    extra = SimpleNamespace(
        caller=SimpleNamespace(file_name=caller[0], line_number=caller[1]) if caller else None,
        inputs=list(inputs),
    )
    node = SimpleNamespace(name=name, tag=tag, parent=parent, children=[], extra_fields=extra)
    if parent is not None:
        parent.children.append(node)
    return node


class Unreadable:
    @property
    def file_name(self):
        raise UnicodeDecodeError("utf-8", b"\xdb", 0, 1, "invalid continuation byte")

    line_number = 1


def test_frames_outside_torch_innermost_first(tmp_path):
    (tmp_path / "train.py").write_text("")
    kinds = SimpleNamespace(PyCall="PyCall", PyCCall="PyCCall")
    reader = matcher._Reader(kinds, matcher._Files([str(tmp_path) + "/"]))
    root = event("<module>", (matcher.LAUNCHER, 300))
    main = event("main", ("train.py", 20), root)
    loop = event("torch/utils/data/dataloader.py(1): __iter__", ("train.py", 12), main)
    inner = event("_get_iterator", ("torch/utils/data/dataloader.py", 40), loop)
    frozen = event("find_spec", ("<frozen importlib._bootstrap>", 1), inner)
    lost = event("exec", None, frozen)
    lost.extra_fields.caller = Unreadable()  # freed with its module's code object
    op = event("aten::zero_", parent=lost, tag="TorchOp")
    path = str(tmp_path / "train.py")
    assert reader.frames(op) == [(path, 12), (path, 20)]


def test_cuda_only_patterns_need_a_cuda_tensor():
    cpu = [SimpleNamespace(device="cpu")]
    to = event("aten::to", inputs=cpu, tag="TorchOp")
    copy = event("aten::_to_copy", parent=to, inputs=cpu, tag="TorchOp")
    assert not matcher._on_cuda(to)
    event("aten::copy_", parent=copy, inputs=[SimpleNamespace(device="cuda:0")], tag="TorchOp")
    assert matcher._on_cuda(to)


CPU_LOOKALIKES = """\
import torch
a = torch.zeros(64, 8).to("cpu", copy=True)
b = torch.mm(torch.randn(6, 100, dtype=torch.bfloat16), torch.randn(100, 36).bfloat16())
c = torch.mm(torch.randn(6, 8), torch.randn(8, 8))
"""


@pytest.mark.slow
@pytest.mark.parametrize("cuda", [False, True])
def test_cuda_only_patterns_on_real_events(tmp_path, monkeypatch, cuda):
    """On the CPU, torch's own classes match what only means something on a GPU (a CPU
    copy after a fill, every float32 and bfloat16 matmul): dropped, unless (patched here)
    the tensors were on CUDA, and then reported where the script did it."""
    needs_the_profiler_matcher()
    import torch

    script = tmp_path / "lookalikes.py"
    script.write_text(CPU_LOOKALIKES)
    if cuda:
        monkeypatch.setattr(matcher, "_on_cuda", lambda event, depth=3: True)
    paths = matcher.prefixes()
    prof = matcher.start(torch)
    exec(compile(CPU_LOOKALIKES, str(script), "exec"), {})
    found = matcher.finish(prof, str(script), paths)
    lines = {
        name: sorted({m["frames"][0][1] for m in state["matches"]})
        for name, state in found["patterns"].items()
        if name in matcher.CUDA_ONLY
    }
    if cuda:
        assert lines == {
            "ExtraCUDACopyPattern": [2],
            "MatMulDimInFP16Pattern": [3],
            "FP32MatMulPattern": [4],
        }
        assert all(
            m["frames"][0][0] == str(script)
            for m in found["patterns"]["FP32MatMulPattern"]["matches"]
        )
    else:
        assert lines == {name: [] for name in matcher.CUDA_ONLY}
    assert found["lines"] == [2, 3, 4] and found["span_ns"] > 0


AUTOCAST = """\
import torch
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
with torch.autocast("cpu", dtype=torch.bfloat16):
    for step in range(3):
        model(torch.randn(2, 3, 8, 8))
"""


@pytest.mark.slow
def test_an_op_dispatched_again_inside_itself_counts_once(tmp_path):
    """Under autocast `aten::conv2d` runs inside `aten::conv2d`: PyTorch's class matches
    both, torchlint counts the call once (and its time once)."""
    needs_the_profiler_matcher()
    import torch

    script = tmp_path / "autocast.py"
    script.write_text(AUTOCAST)
    paths = matcher.prefixes()
    prof = matcher.start(torch)
    exec(compile(AUTOCAST, str(script), "exec"), {})
    found = matcher.finish(prof, str(script), paths)
    pattern = matcher.importlib.import_module(matcher.MODULE).Conv2dBiasFollowedByBatchNorm2dPattern
    assert sum(map(pattern(prof).match, pattern(prof).eventTreeTraversal())) == 6
    matches = found["patterns"]["Conv2dBiasFollowedByBatchNorm2dPattern"]["matches"]
    assert [(m["frames"][0][1], m["count"]) for m in matches] == [(5, 3)]


def test_fp32_matmul_asks_the_gpu_that_ran():
    torch = pytest.importorskip("torch")
    skipping = SimpleNamespace(skip=True)
    assert not matcher._skipped("FP32MatMulPattern", SimpleNamespace(skip=False), torch)
    assert matcher._skipped("ExtraCUDACopyPattern", skipping, torch)
    # PyTorch skips it for a build whose architectures include pre-Ampere ones; this
    # asks the device instead, and without CUDA there is none.
    assert matcher._skipped("FP32MatMulPattern", skipping, torch) == (
        not torch.cuda.is_initialized()
    )


def test_the_installed_torch_has_the_matcher():
    needs_the_profiler_matcher()
    assert matcher.problem() is None


def test_a_torch_newer_than_checked_without_the_matcher_skips_the_real_runs(monkeypatch):
    """torch 2.14 dropped the private module: the tests that profile for real skip, with
    the reason; on a release --profile is checked on they run (and fail without it)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(matcher, "problem", lambda: "torch 2.14.0 has no run-time matcher")
    monkeypatch.setattr(torch, "__version__", "2.14.0")
    reason = "--profile is checked on torch 2.0 to 2.13: torch 2.14.0 has no run-time matcher"
    with pytest.raises(pytest.skip.Exception, match=re.escape(reason)):
        needs_the_profiler_matcher()
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    needs_the_profiler_matcher()  # no skip
    assert matcher.checked_on("2.0.1") and not matcher.checked_on("1.13.1")
    assert not matcher.checked_on("2.14.0")


def test_a_torch_without_the_matcher_is_named(monkeypatch):
    pytest.importorskip("torch")

    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(matcher.importlib, "import_module", missing)
    assert "has no run-time anti-pattern matcher" in (matcher.problem() or "")
    monkeypatch.setattr(
        matcher.importlib, "import_module", lambda name: SimpleNamespace(FP32MatMulPattern=object)
    )
    found = matcher.problem() or ""
    assert "lacks what --profile reads" in found and "SynchronizedDataLoaderPattern" in found


def test_a_torch_whose_events_lack_a_field_is_named(monkeypatch):
    pytest.importorskip("torch")
    import torch._C._profiler as events

    real = matcher.importlib.import_module
    older = SimpleNamespace(**{n: getattr(events, n) for n in dir(events)})
    older._ExtraFields_TorchOp = SimpleNamespace()  # no `inputs`
    monkeypatch.setattr(
        matcher.importlib,
        "import_module",
        lambda name: older if name == "torch._C._profiler" else real(name),
    )
    found = matcher.problem() or ""
    assert "lacks what --profile reads (_ExtraFields_TorchOp.inputs)" in found
    # torch 1.13's shape: the inputs of an op in one `_Inputs` object
    older._ExtraFields_TorchOp = events._ExtraFields_TorchOp
    older._Inputs = type("_Inputs", (), {"shapes": (), "dtypes": ()})
    found = matcher.problem() or ""
    assert "lacks what --profile reads (_ExtraFields_TorchOp.inputs as a list)" in found


# -- the command ---------------------------------------------------------------------------


def verify(script: Path, args=(), **kwargs):
    """`torchlint verify --profile --preview` (run-time evidence for preview rules too)."""
    out, err = io.StringIO(), io.StringIO()
    options = VerifyOptions(script, tuple(args), profile=True, preview=True, **kwargs)
    code = command.verify(options, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tune_batch_size": True}, "drop --tune-batch-size"),
        ({"nproc_per_node": 2}, "drop --nproc-per-node"),
        ({"plot": Path("report.png")}, "--plot with --profile writes the report as HTML"),
    ],
)
def test_options_that_do_not_go_with_profile(kwargs, message):
    code, _, err = verify(EXAMPLES / "train_classifier.py", **kwargs)
    assert code == 2 and message in err and "Traceback" not in err


def test_torch_without_the_matcher_is_bad_input(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setattr(matcher, "problem", lambda: "torch 1.9.0 has no run-time matcher")
    code, out, err = verify(EXAMPLES / "train_classifier.py")
    assert (
        code == 2 and err.strip() == "torchlint verify: error: torch 1.9.0 has no run-time matcher"
    )
    assert out == ""


# -- real runs (torch on the CPU) ----------------------------------------------------------

CHECKABLE_ON_CPU = {c for p in patterns.PATTERNS if not p.cuda for c in p.rules}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "args", "confirmed"),
    [
        ("train_classifier.py", ["--epochs", "2", "--steps", "2"], {"TL201": 2}),
        # no zeros to write at step 1; TL605: single-tensor on the CPU, at each step
        ("finetune_and_evaluate.py", [], {"TL405": 7, "TL605": 8}),
        ("verify/slow_loader.py", ["--epochs", "2", "--samples", "32"], {"TL201": 2, "TL605": 8}),
        ("verify/compute_bound.py", ["--epochs", "1", "--samples", "64"], {"TL605": 2}),
        # verify/profile_patterns.py: below
    ],
)
def test_bundled_examples(tmp_path, script, args, confirmed):
    needs_the_profiler_matcher()
    out_json, page = tmp_path / "p.json", tmp_path / "p.html"
    copy = tmp_path / Path(script).name  # what the script writes stays out of the checkout
    # every rule, the advice ones (off by default) and the preview ones too
    shutil.copyfile(EXAMPLES / script, copy)
    result = run_cli(
        "verify", str(copy), "--profile", "--preview", "--select", "ALL", "--json", str(out_json),
        "--plot", str(page), "--", *args,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(out_json.read_text())["profile"]
    print(result.stdout)  # the report, for the record (pytest -s)
    checkable = [f for f in report["findings"] if f["code"] in CHECKABLE_ON_CPU]
    # Every finding of a rule with a pattern that runs on the CPU is confirmed, as often as
    # the run did it: once per epoch for a loader (every epoch is inside the profile).
    assert {f["code"]: f["count"] for f in checkable} == confirmed
    assert all(f["status"] == "confirmed" and f["ns"] > 0 for f in checkable)
    for f in report["findings"]:
        if f["code"] not in CHECKABLE_ON_CPU:
            assert f["status"] == "not checkable", f
    assert "Static findings, checked against PyTorch's run-time anti-pattern matcher" in (
        result.stdout
    )
    assert (
        re.search(r"TL\d+ .* confirmed +\d+ +[\d.]+ (ms|µs|s) \(", result.stdout) or not confirmed
    )
    assert "<table" in page.read_text() and "torchlint verify --profile" in page.read_text()


@pytest.mark.slow
def test_a_pattern_torchlint_misses_is_seen_at_run_time_only(tmp_path):
    """The bundled example made for it: TL603 finds the conv bias before BatchNorm in
    `forward`, not the same in a `nn.ModuleList` (whose order it does not read); TL605
    (advice, off by default) is not selected. Its findings with a pattern are confirmed
    like the other examples'."""
    needs_the_profiler_matcher()
    out_json = tmp_path / "p.json"
    result = run_cli(
        "verify", str(EXAMPLES / "verify" / "profile_patterns.py"), "--profile", "--steps", "4",
        "--json", str(out_json), "--", "--samples", "64",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out_json.read_text())
    findings = {(f["code"], f["status"], f["count"]) for f in data["profile"]["findings"]}
    # two epochs of two batches: both passes over the loader, zeros from step 2 on
    assert findings == {
        ("TL201", "confirmed", 2),
        ("TL405", "confirmed", 3),
        ("TL603", "confirmed", 4),
        ("TL202", "not checkable", 0),
        ("TL001", "not checkable", 0),  # batch 32 for a 4,882-parameter network
        ("TL601", "not checkable", 0),  # cuDNN's autotuner: no profiler pattern for it
    }
    rows = {r["pattern"]: r for r in data["profile"]["runtime_only"]}
    conv = rows["Conv2dBiasFollowedByBatchNorm2dPattern"]
    assert conv["where"] == "profile_patterns.py:50" and conv["count"] == 4  # `layer(x)`
    assert conv["why"] == "TL603 reported nothing here (a recall gap)"
    single = rows["OptimizerSingleTensorPattern"]
    assert single["where"] == "profile_patterns.py:72" and single["why"] == "TL605 not selected"
    assert data["profile"]["steps"] == 4  # stopped at --steps
    assert [r["status"] for r in data["runs"]] == ["ok"]
    assert not any(e["event"] == "profile" for e in data["runs"][0]["events"])
    assert "Seen at run time only" in result.stdout and "Conv2d with a bias" in result.stdout


@pytest.mark.slow
def test_edge_cases(tmp_path):
    needs_the_profiler_matcher()
    out_json = tmp_path / "p.json"
    code, out, err = verify(
        ROOT / "tests" / "profile" / "edge_cases.py", steps=10, json_out=out_json
    )
    assert code == 0, out + err
    report = json.loads(out_json.read_text())["profile"]
    rows = {
        (f["line"], f["code"]): (f["status"], f["entity"], f["detail"]) for f in report["findings"]
    }
    assert rows[(38, "TL201")][:2] == ("confirmed", "DataLoader `loader` (line 38)")  # next()
    assert rows[(45, "TL405")] == (  # a model's own zero_grad
        "confirmed",
        "model `model` (line 40)",
        "matched at edge_cases.py:45",
    )
    assert rows[(31, "TL405")] == (  # after the profiled steps
        "not seen",
        "optimizer `head` (line 29)",
        "it did not run in the profiled steps",
    )
    runtime = {(r["pattern"], r["entity"], r["why"]) for r in report["runtime_only"]}
    suppressed = "suppressed by a noqa comment on line 39"
    assert runtime == {
        ("SynchronizedDataLoaderPattern", "DataLoader `extra` (line 39)", suppressed),
        ("OptimizerSingleTensorPattern", "optimizer `optimizer` (line 41)", "TL605 not selected"),
    }
    assert "summary: 2 of 3 checkable finding(s) confirmed, 1 not seen" in out


@pytest.mark.slow
def test_a_script_that_fails_after_some_steps(tmp_path):
    needs_the_profiler_matcher()
    script = tmp_path / "fails.py"
    script.write_text(
        textwrap.dedent(
            """\
            import torch
            model = torch.nn.Linear(4, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                opt.zero_grad(set_to_none=False)
                model(torch.randn(2, 4)).sum().backward()
                opt.step()
            raise RuntimeError("checkpoint directory missing")
            """
        )
    )
    code, out, err = verify(script)
    assert code == 1, out + err
    assert "confirmed" in out  # the profile of what ran is reported
    assert "the script raised RuntimeError: checkpoint directory missing" in out
    assert "the profile covers what ran until then" in out and "Traceback" not in err


@pytest.mark.slow
def test_a_script_that_never_imports_torch(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("print('hello')\n")
    needs_the_profiler_matcher()
    code, out, _ = verify(script)
    assert code == 1
    assert "could not be profiled" in out and "without importing torch" in out


@pytest.mark.slow
def test_a_script_that_runs_its_own_profiler(tmp_path):
    """Its profiler ends the session: said so, not reported as code that did not run."""
    script = tmp_path / "profiles.py"
    script.write_text(
        textwrap.dedent(
            """\
            import torch
            model = torch.nn.Linear(4, 1)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            with torch.profiler.profile():
                opt.zero_grad(set_to_none=False)
                model(torch.randn(2, 4)).sum().backward()
                opt.step()
            """
        )
    )
    needs_the_profiler_matcher()
    code, out, err = verify(script)
    assert code == 1 and "not seen" not in out, out + err
    assert "the script stopped torch.profiler before the end" in err + out
