"""A small training script whose data loading is deliberately slow.

Each sample is synthesised in Python by `__getitem__` (a stand-in for decoding and
augmenting an image), and the DataLoader does it on the main process, in batches so
small that every step pays the model's fixed per-step cost for a few samples. `torchlint check` flags the loader
(TL201, and TL001 for the batch size); `torchlint verify --unsafe-fixes` runs this
script as it is and as fixed and shows the fixed one is faster, even on a laptop CPU:

    torchlint verify examples/verify/slow_loader.py --unsafe-fixes -- --epochs 2
"""

import argparse
import math
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

LENGTH = 128
CLASSES = 10


class Waveforms(Dataset):
    """Noisy sine waves; the label is the frequency bucket."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        rng = random.Random(index)
        label = rng.randrange(CLASSES)
        freq = (label + 1) * 0.02
        phase = rng.random() * math.tau
        wave = [math.sin(freq * t + phase) + rng.gauss(0.0, 0.3) for t in range(LENGTH)]
        # A moving average: the kind of per-sample preprocessing real loaders do.
        smooth = [sum(wave[max(0, t - 4) : t + 1]) / 5 for t in range(LENGTH)]
        return torch.tensor(smooth), label


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=4096)
    args = parser.parse_args()
    # One intra-op thread: on a small machine the cores are needed for data loading.
    torch.set_num_threads(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    loader = DataLoader(Waveforms(args.samples), batch_size=8, shuffle=True)
    layers = [nn.Linear(LENGTH, 256), nn.ReLU()]
    for _ in range(12):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(256, CLASSES)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: loss {total / len(loader):.4f}")


if __name__ == "__main__":
    main()
