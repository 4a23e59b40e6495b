"""What `torchlint verify --profile` must tell apart (tests/test_verify_profile.py runs it
with --steps 10): a loader stepped with next(), a model's own zero_grad, a suppressed
finding, and code that runs only after the profiled steps."""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Squares(Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int):
        x = torch.full((8,), float(index)).sqrt()
        return x, x.sum()


def fit(model: nn.Module, optimizer: torch.optim.Optimizer, x, y) -> None:
    loss = ((model(x.to(device)).squeeze(1) - y.to(device)) ** 2).mean()
    loss.backward()
    optimizer.step()


def finetune(model: nn.Module) -> None:
    """Runs after the profiled steps: its finding is not seen."""
    head = torch.optim.Adam(model.parameters())
    for _ in range(3):
        head.zero_grad(set_to_none=False)
        x = torch.randn(4, 8, device=device)
        model(x).sum().backward()
        head.step()


def main() -> None:
    loader = DataLoader(Squares(), batch_size=8)
    extra = DataLoader(Squares(), batch_size=8)  # noqa: TL201
    model = nn.Linear(8, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    batches = iter(loader)
    for _ in range(6):
        x, y = next(batches)
        model.zero_grad(set_to_none=False)
        fit(model, optimizer, x, y)
    for x, y in extra:
        optimizer.zero_grad()
        fit(model, optimizer, x, y)
    finetune(model)


if __name__ == "__main__":
    main()
