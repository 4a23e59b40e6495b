"""A small image classifier with the anti-patterns PyTorch's profiler recognises.

`torchlint check` finds most of them where they are written: the DataLoader decodes
every batch on the main process (TL201), `zero_grad(set_to_none=False)` writes zeros
into every gradient (TL405), a convolution with a bias directly followed by BatchNorm
(TL603: the bias is cancelled). One it cannot see: the same in a `nn.ModuleList`, whose
order TL603 does not read; and the optimizer runs its single-tensor implementation (on
a GPU, TL605 says so when selected). `torchlint verify --profile` runs the script under
torch.profiler and joins the two views, on a laptop CPU too:

    torchlint verify examples/verify/profile_patterns.py --profile
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class Shapes(Dataset):
    """16x16 images of a bright square or a dark one, with noise added per sample."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        generator = torch.Generator().manual_seed(index)
        label = index % 2
        image = torch.randn(3, 16, 16, generator=generator) * 0.5
        image[:, 4:12, 4:12] += 1.0 if label else -1.0
        return image, label


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.refine = nn.ModuleList([nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)])
        self.head = nn.Linear(16 * 8 * 8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.conv(x)))
        for layer in self.refine:
            x = layer(x)
        x = F.max_pool2d(F.relu(x), 2)
        return self.head(x.flatten(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=256)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    loader = DataLoader(Shapes(args.samples), batch_size=32, shuffle=True)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(args.epochs):
        total = torch.zeros((), device=device)
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            total += loss.detach()
        print(f"epoch {epoch}: loss {total.item() / len(loader):.4f}")


if __name__ == "__main__":
    main()
