"""The rule <-> pattern table of `torchlint verify --profile`: each of PyTorch's run-time
anti-pattern classes, the rules that find its cause statically, and the entity both
sides are joined on (docs/verify.md shows it; a test keeps the two equal)."""

from __future__ import annotations

from dataclasses import dataclass

LOADER, OPTIMIZER, MODEL, STATEMENT, SCRIPT = (
    "DataLoader",
    "optimizer",
    "model",
    "statement",
    "script",
)


@dataclass(frozen=True)
class Pattern:
    """One of PyTorch's pattern classes and what torchlint knows of it."""

    cls: str  # the class in torch.profiler._pattern_matcher
    label: str
    rules: tuple[str, ...]  # the rules that find it statically
    entity: str  # what both sides are mapped to
    reported_at: str  # where PyTorch's matcher puts it
    cuda: bool = False  # about CUDA tensors: checked only where the run used CUDA
    prefer: tuple[str, ...] = ()  # MODEL: on a line calling several, the one built so
    narrower: str = ""  # where the pattern finds less than its rules: why "not seen" clears none


PATTERNS = (
    Pattern(
        "SynchronizedDataLoaderPattern",
        "DataLoader without worker processes",
        ("TL201",),
        LOADER,
        "the loop (or `iter(...)`) that starts each pass over the loader",
    ),
    Pattern(
        "GradNotSetToNonePattern",
        "gradients zeroed instead of set to None",
        ("TL405",),
        OPTIMIZER,
        "the `zero_grad(...)` call",
    ),
    Pattern(
        "OptimizerSingleTensorPattern",
        "single-tensor optimizer (neither foreach nor fused)",
        ("TL605",),
        OPTIMIZER,
        "the `step()` call",
        narrower=(
            "PyTorch's pattern sees single-tensor steps only, and a foreach optimizer "
            "(the default on a GPU) is not fused either"
        ),
    ),
    Pattern(
        "Conv2dBiasFollowedByBatchNorm2dPattern",
        "Conv2d with a bias, followed by BatchNorm2d",
        ("TL603",),
        MODEL,
        "the call of the convolution (in `forward`, or the model's call)",
        prefer=("torch.nn.Conv2d",),
    ),
    Pattern(
        "ExtraCUDACopyPattern",
        "tensor filled on the CPU, then copied to the GPU",
        ("TL104",),
        STATEMENT,
        "the `.to(...)`/`.cuda()` call",
        cuda=True,
    ),
    Pattern(
        "FP32MatMulPattern",
        "FP32 matmul on a GPU with TF32",
        ("TL503",),
        SCRIPT,
        "the call that runs the matmul",
        cuda=True,
    ),
    Pattern(
        "MatMulDimInFP16Pattern",
        "fp16/bf16 matmul with dimensions not multiples of 8",
        (),
        MODEL,
        "the call of the layer or model doing the matmul",
        cuda=True,
    ),
)
BY_RULE = {code: p for p in PATTERNS for code in p.rules}
# What each side is mapped to, for the docs' table.
JOINED_BY = {
    LOADER: "the DataLoader (a finding sits at its constructor)",
    OPTIMIZER: (
        "the optimizer a `step()`/`zero_grad()` acts on (or the model, for `model.zero_grad()`)"
    ),
    MODEL: "the model or layer called (a finding sits at its constructor)",
    STATEMENT: "the statement",
    SCRIPT: "the script (one setting for all of it)",
}


def markdown_table() -> str:
    """The rule <-> pattern table of docs/verify.md."""
    header = ["PyTorch's pattern class", "what it finds", "rule", "joined by"]
    rows = [[*header, "PyTorch reports it at", "checked"]]
    for p in PATTERNS:
        rules = ", ".join(p.rules) or "none yet: seen at run time only"
        where = "with a CUDA GPU" if p.cuda else "on the CPU and GPUs"
        rows.append([f"`{p.cls}`", p.label, rules, JOINED_BY[p.entity], p.reported_at, where])
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join([lines[0], "|---" * len(rows[0]) + "|", *lines[1:]])
