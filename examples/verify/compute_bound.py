"""A training script whose time goes to the model, not to data loading.

Each sample is a small in-memory sequence (16 tokens of 64 features) and each step runs
a wide per-token MLP over 32 of them, so on a GPU a step's matrix products take many
times longer than indexing and collating the next batch, which the CPU does while the
GPU computes (nothing in the loop waits for the GPU). `torchlint check` flags the
DataLoader all the same (TL201 workers, TL202 pinned memory, TL203, the host-to-device
copies); on a GPU the right answer of `torchlint verify` is "no difference detected":

    torchlint verify examples/verify/compute_bound.py --unsafe-fixes -- --epochs 100

On a CPU the model and the loader share the cores, so what the fixes do there depends
on the machine.
"""

import argparse

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

TOKENS = 16
FEATURES = 64
CLASSES = 10


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--width", type=int, help="hidden width (default 8192 on a GPU, else 256)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    width = args.width or (8192 if device.type == "cuda" else 256)

    data = TensorDataset(
        torch.randn(args.samples, TOKENS, FEATURES), torch.randint(0, CLASSES, (args.samples,))
    )
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(
        nn.Linear(FEATURES, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Linear(width, CLASSES),
    ).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        total = torch.zeros((), device=device)  # summed on the device: no sync per step
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = criterion(model(x).mean(dim=1), y)
            loss.backward()
            optimizer.step()
            total += loss.detach()
        print(f"epoch {epoch}: loss {total.item() / len(loader):.4f}")


if __name__ == "__main__":
    main()
