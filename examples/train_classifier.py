"""Train a small image classifier (CIFAR-10 shaped synthetic data so it runs anywhere).

A typical first training script: it works, but leaves a GPU mostly idle.
Run: python train_classifier.py [--epochs N] [--steps N]  (--steps: per epoch, 0 = all)
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SyntheticCIFAR(Dataset):
    """CIFAR-10's 50,000 random 3x32x32 images with labels, each made when it is read
    (as a decoder would); __getitem__ does some per-sample work."""

    def __init__(self, size: int = 50_000) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        generator = torch.Generator().manual_seed(index)
        image = torch.randn(3, 32, 32, generator=generator)
        image = (image - image.mean()) / (image.std() + 1e-6)  # per-sample normalisation
        return image, int(torch.randint(0, 10, (), generator=generator))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=0, help="steps per epoch (0 = all)")
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader = DataLoader(SyntheticCIFAR(), batch_size=8, shuffle=True)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    for epoch in range(args.epochs):
        running_loss, steps = 0.0, 0
        for step, (images, labels) in enumerate(train_loader):
            if args.steps and step >= args.steps:
                break
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss
            steps += 1
            torch.cuda.empty_cache()
        print(f"epoch {epoch}: loss {running_loss / max(1, steps):.4f}")

    torch.save(model.state_dict(), "classifier.pt")


if __name__ == "__main__":
    main()
