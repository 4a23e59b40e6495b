"""Fine-tune a pretrained regression head and evaluate it (synthetic data).

Run: python finetune_and_evaluate.py
"""

import os

import torch
from torch import nn
from torch.cuda.amp import GradScaler, autocast
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_data(n: int) -> TensorDataset:
    features = torch.randn(n, 64)
    targets = features[:, :1] * 2.0 + 0.1 * torch.randn(n, 1)
    return TensorDataset(features, targets)


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    total, count = 0.0, 0
    for features, targets in loader:
        features, targets = features.to(device), targets.to(device)
        total += nn.functional.mse_loss(model(features), targets, reduction="sum").item()
        count += len(targets)
    return total / count


def main() -> None:
    torch.manual_seed(0)
    train_loader = DataLoader(make_data(256), batch_size=64, shuffle=True, num_workers=0)
    val_loader = DataLoader(make_data(128), batch_size=128)

    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1))
    if os.path.exists("head.pt"):
        model.load_state_dict(torch.load("head.pt"))
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = GradScaler(enabled=device.type == "cuda")

    for epoch in range(2):
        model.train()
        for features, targets in train_loader:
            features, targets = features.to(device), targets.to(device)
            optimizer.zero_grad(set_to_none=False)
            with autocast(enabled=device.type == "cuda"):
                loss = nn.functional.mse_loss(model(features), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            print(f"step loss {loss.item():.4f}")
        print(f"epoch {epoch}: val mse {evaluate(model, val_loader):.4f}")


if __name__ == "__main__":
    main()
