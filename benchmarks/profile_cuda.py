"""The run-time patterns PyTorch's matcher reports only for CUDA tensors, in one script.

`benchmarks/gpu_evidence.sh` profiles it with `torchlint verify --profile` and checks the
join: a tensor filled on the CPU and copied to the GPU every step (TL104, confirmed by
ExtraCUDACopyPattern), a float32 matmul with TF32 off (FP32MatMulPattern) and a float16
one whose dimensions are not multiples of 8 (MatMulDimInFP16Pattern), both seen at run
time only (TL503 is advice, not selected by default; no rule checks fp16 alignment).
Without a GPU it runs on the CPU, where none of them can occur.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(100, 36)  # float16 under autocast: 100 and 36 are not 8k
        self.out = nn.Linear(36, 10)  # float32: TF32 is off unless the script turns it on

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device.type, dtype=torch.float16, enabled=device.type == "cuda"):
            h = torch.relu(self.proj(x))
        return self.out(h.float())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    model = Head().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(args.steps):
        x = torch.randn(64, 100, device=device)
        target = torch.zeros(64, dtype=torch.long).to(device)
        loss = F.cross_entropy(model(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
