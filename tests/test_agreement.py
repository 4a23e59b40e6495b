"""One table of device/model/loop snippets, run through every rule that reads devices,
models or loops. Each row states what the semantic layer must conclude (device kinds,
model kinds, which calls are optimizer steps) and every finding of every one of those
rules (`# expect: TL101, TL501` on a line; a line without it must stay silent), so the
rules cannot disagree about a line and "all silent" cannot pass: every rule of the table
reports on some row. Not in the table: rules that read only what is called with which
arguments, never a device, a model or a loop (`CALLS_ONLY`), the framework rules
(TL7xx), which read a Trainer's or TrainingArguments' settings, and the meta rules
(TL9xx), which read comments; their fixtures hold them."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

import libcst as cst
import pytest

from torchlint.config.load import default_options, instantiate
from torchlint.lint.linter import Linter
from torchlint.lint.registry import builtin_rules
from torchlint.semantic import DeviceKind, ModelKind, Settings, build

RULES = [
    "TL001", "TL002", "TL101", "TL102", "TL104", "TL105", "TL106", "TL201", "TL202", "TL203",
    "TL204", "TL205", "TL206", "TL301", "TL303", "TL304", "TL305", "TL401", "TL402", "TL403",
    "TL404", "TL406", "TL407", "TL408", "TL409", "TL410", "TL411", "TL412", "TL413", "TL414",
    "TL415", "TL501", "TL503", "TL504", "TL601", "TL602", "TL603", "TL604", "TL605", "TL606",
    "TL607", "TL609",
]  # fmt: skip
CALLS_ONLY = {"TL302", "TL306", "TL405", "TL502", "TL608"}  # TL608: expressions of a function
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>TL\d+(?:\s*,\s*TL\d+)*)")
CPU, CUDA, ACCEL = DeviceKind.CPU, DeviceKind.CUDA, DeviceKind.ACCELERATOR
UNKNOWN = DeviceKind.UNKNOWN
NETWORK, LOSS = ModelKind.NETWORK, ModelKind.LOSS

HEADER = """\
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader


class Net(nn.Module):  # about 17M parameters: worth spreading over GPUs (TL301)
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 3)
        self.hidden = nn.Sequential(nn.Linear(64, 4096), nn.ReLU(), nn.Linear(4096, 4096))
        self.head = nn.Linear(4096, 10)

    def forward(self, x):
        return self.head(self.hidden(self.conv(x).mean((2, 3))))


"""


@dataclass
class Row:
    name: str
    code: str
    devices: dict[str, DeviceKind] = field(default_factory=dict)  # receiver -> every move's kind
    models: dict[str, ModelKind] = field(default_factory=dict)  # name -> kind
    steps: dict[str, bool] = field(default_factory=dict)  # call text -> is an optimizer step


ROWS = [
    Row(
        "Lightning: the framework's step and loaders; the loop rules stay out",
        """
        import lightning as L
        from torchvision import datasets, transforms


        class Model(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = Net()

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self.net(x), y)
                self.log("loss", loss.item())  # expect: TL401
                return loss

            def train_dataloader(self):
                images = datasets.MNIST("data", transform=transforms.ToTensor())
                return DataLoader(images, batch_size=64)  # expect: TL201, TL202

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)


        if __name__ == "__main__":
            L.Trainer(max_epochs=1).fit(Model())
        """,
    ),
    Row(
        "accelerator device: a GPU for every rule",
        """
        device = torch.accelerator.current_accelerator()
        model = Net()  # expect: TL606
        model.to(device)  # one GPU: nothing says several (TL301)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4)  # expect: TL202
        for x, y in loader:  # expect: TL501, TL503, TL601
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(loss.item())  # expect: TL401
        """,
        devices={"model": ACCEL, "x": ACCEL, "y": ACCEL},
        models={"model": NETWORK},
        steps={"optimizer.step()": True},
    ),
    Row(
        "f-string CUDA rank, batches never moved",
        """
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=0)
        args = parser.parse_args()
        model = Net()  # expect: TL606
        model.to(f"cuda:{args.local_rank}")  # expect: TL301
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:  # expect: TL501, TL503, TL601
            loss = F.cross_entropy(model(x), y)  # expect: TL101
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        devices={"model": CUDA},
    ),
    Row(
        "args.device for model and batches: unknown, consistent",
        """
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cpu")
        args = parser.parse_args()
        model = Net()
        model.to(args.device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(dataset, batch_size=64, num_workers=4)
        for x, y in loader:
            x, y = x.to(args.device), y.to(args.device)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        devices={"model": UNKNOWN, "x": UNKNOWN, "y": UNKNOWN},
    ),
    Row(
        "args.device for the model only: the devices differ",
        """
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cpu")
        args = parser.parse_args()
        model = Net()
        model.to(args.device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(dataset, batch_size=64, num_workers=4)
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)  # expect: TL101
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        devices={"model": UNKNOWN},
    ),
    Row(
        "losses moved to CUDA are not models",
        """
        model = Net().cuda()  # expect: TL606 (one GPU: nothing says several, TL301)
        criterion = nn.CrossEntropyLoss().cuda()
        adversarial_loss = nn.BCELoss()
        adversarial_loss.cuda()
        optimizer = torch.optim.Adam(model.parameters())  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:  # expect: TL503, TL601 (BCELoss, which autocast refuses: TL501)
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = criterion(model(x), y) + adversarial_loss(model(x).sigmoid(), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        models={"model": NETWORK, "criterion": LOSS, "adversarial_loss": LOSS},
    ),
    Row(
        "the model never moved while its batches are",
        """
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = Net()  # expect: TL102
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        devices={"images": CUDA, "labels": CUDA},
        models={"model": NETWORK},
    ),
    Row(
        "a scheduler steps once per epoch: not an optimizer",
        """
        model = Net().cuda()  # expect: TL606 (one GPU: nothing says several, TL301)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)  # expect: TL203
        for epoch in range(10):  # expect: TL503, TL601
            for x, y in loader:  # expect: TL501
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            scheduler.step()
            val_loss = F.cross_entropy(model(x), y)
            print(val_loss.item())
        """,
        steps={"scheduler.step()": False, "optimizer.step()": True},
    ),
    Row(
        "a class wrapping torch.optim.Adam steps it",
        """
        class ScheduledOptim:
            def __init__(self, optimizer, warmup):
                self._optimizer = optimizer
                self.warmup = warmup

            def step_and_update_lr(self):
                self._optimizer.step()


        model = Net().cuda()  # expect: TL606 (one GPU: nothing says several, TL301)
        optimizer = ScheduledOptim(torch.optim.Adam(model.parameters()), 4000)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)  # expect: TL203
        total = 0.0
        for epoch in range(10):  # expect: TL503, TL601
            for x, y in loader:  # expect: TL501
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step_and_update_lr()
                total += loss.item()  # expect: TL401
            print(total)
        """,
        steps={"optimizer.step_and_update_lr()": True},
    ),
    Row(
        "a Trainer class keeps its model and loader on self",
        """
        class Trainer:
            def __init__(self, dataset):
                self.device = torch.device("cuda")
                self.model = Net().to(self.device)  # expect: TL606 (one GPU only: TL301 silent)
                self.loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
                self.optimizer = torch.optim.Adam(self.model.parameters())  # expect: TL605

            def train(self):
                for inputs, targets in self.loader:  # expect: TL501, TL503, TL601
                    loss = F.cross_entropy(self.model(inputs), targets)  # expect: TL101
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
        """,
        devices={"Net()": CUDA},
        models={"self.model": NETWORK},
        steps={"self.optimizer.step()": True},
    ),
    Row(
        "a module-level float() shadows the builtin",
        """
        def float(x):
            return x


        model = Net().cuda()  # expect: TL606 (one GPU: nothing says several, TL301)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:  # expect: TL501, TL503, TL601
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            history = float(loss)
        """,
    ),
    Row(
        "rank-indexed CUDA devices: the same answer from every rule",
        """
        rank = int(os.environ["RANK"])
        local_rank = int(os.environ["LOCAL_RANK"])
        device = torch.device(f"cuda:{rank}")
        model = Net().cuda(local_rank)  # expect: TL301, TL606
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4)  # expect: TL202
        for x, y in loader:  # expect: TL501, TL503, TL601
            x = x.to(device)
            y = y.cuda(local_rank)
            mask = torch.ones(64, 10).to(device)  # expect: TL104
            loss = F.cross_entropy(model(x) * mask, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        devices={"Net()": CUDA, "torch.ones(64, 10)": CUDA, "x": CUDA, "y": CUDA},
    ),
    Row(
        "an image folder decoded by two workers; MNIST in memory on two is left alone",
        """
        from torchvision import datasets, transforms

        model = Net().cuda()  # expect: TL606
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        folder = datasets.ImageFolder("train", transform=transforms.ToTensor())
        mnist = datasets.MNIST("data", transform=transforms.ToTensor())
        photos = DataLoader(folder, batch_size=64, num_workers=2, pin_memory=True)  # expect: TL206
        digits = DataLoader(mnist, batch_size=64, num_workers=2, pin_memory=True)
        for x, y in photos:  # expect: TL501, TL503, TL601
            loss = F.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        for x, y in digits:  # expect: TL501
            loss = F.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        devices={"Net()": CUDA},
    ),
    Row(
        "loader rules on a CUDA training script",
        """
        model = Net().cuda()  # expect: TL606 (batches of 8 and 1: not worth spreading, TL301)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        small = DataLoader(dataset, batch_size=8)  # expect: TL001, TL201, TL202
        default = DataLoader(dataset, num_workers=2, pin_memory=True)  # expect: TL002, TL203
        val_loader = DataLoader(dataset, batch_size=256, num_workers=2)  # expect: TL203
        total = 0.0
        for epoch in range(3):  # expect: TL503, TL601
            for x, y in small:  # expect: TL501
                x, y = x.cuda(), y.cuda()
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss  # expect: TL403
                torch.cuda.empty_cache()  # expect: TL402
            for x, y in default:  # expect: TL501
                x = x.cuda()  # expect: TL105
                y = y.cuda(non_blocking=True)
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            model.eval()
            for x, y in val_loader:  # expect: TL404
                correct = (model(x.cuda(non_blocking=True)).argmax(1) == y.cuda(non_blocking=True))
            model.train()
        """,
        steps={"optimizer.step()": True},
    ),
    Row(
        "DistributedDataParallel: samplers and epochs",
        """
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DistributedSampler

        dist.init_process_group("nccl")
        local_rank = int(os.environ["LOCAL_RANK"])
        model = DDP(Net().cuda(local_rank), device_ids=[local_rank])  # expect: TL606
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        sampler = DistributedSampler(dataset)  # expect: TL304
        loader = DataLoader(
            dataset, batch_size=64, sampler=sampler, num_workers=4, pin_memory=True,
            persistent_workers=True,
        )
        plain = DataLoader(  # expect: TL303
            dataset, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True,
        )
        for epoch in range(3):  # expect: TL503, TL601
            for x, y in loader:  # expect: TL501
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            for x, y in plain:  # expect: TL501
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        devices={"Net()": CUDA},
        models={"model": NETWORK},
    ),
    Row(
        "mixed-precision CNN with determinism forced: the backend rules agree (TL601 yields)",
        """
        torch.backends.cudnn.deterministic = True  # expect: TL602
        model = Net().cuda()  # expect: TL604, TL606 (one GPU: nothing says several, TL301)
        optimizer = torch.optim.AdamW(model.parameters())  # expect: TL605
        scaler = torch.amp.GradScaler("cuda")
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)  # expect: TL203
        for epoch in range(3):
            for x, y in loader:
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
        """,
        devices={"Net()": CUDA},
        models={"model": NETWORK},
        steps={"scaler.step(optimizer)": True},
    ),
    Row(
        "gradient accumulation under DDP, and the same loop on a plain model",
        """
        from torch.nn.parallel import DistributedDataParallel as DDP

        local_rank = int(os.environ["LOCAL_RANK"])
        model = DDP(Net().cuda(local_rank), device_ids=[local_rank])  # expect: TL606
        single = Net().cuda()
        optimizer = torch.optim.SGD([*model.parameters(), *single.parameters()])  # expect: TL605
        for step, (x, y) in enumerate(loader):  # expect: TL501, TL503, TL601
            loss = F.cross_entropy(model(x.cuda(local_rank)), y.cuda(local_rank)) / 4
            loss.backward()  # expect: TL305
            if (step + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()
        for step, (x, y) in enumerate(loader):  # expect: TL501
            loss = F.cross_entropy(single(x.cuda()), y.cuda()) / 4
            loss.backward()
            if (step + 1) % 4 == 0:
                optimizer.step()
        """,
        devices={"Net()": CUDA},
        models={"model": NETWORK, "single": NETWORK},
        steps={"optimizer.step()": True},
    ),
    Row(
        "a library's functions, every parameter unseen: only advice harmless on a CPU",
        """
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
        torch.autograd.set_detect_anomaly(True)  # expect: TL406


        def train_one_epoch(model, loader, optimizer, device):
            model.train()
            total = 0.0
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                noise = torch.randn(x.shape).to(device)  # expect: TL104
                loss = F.cross_entropy(model(x + noise), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss  # expect: TL403
                print(loss.item())  # expect: TL401
            return total / len(list(loader))  # expect: TL205


        def evaluate(model, loader, device):
            model.eval()
            for x, y in loader:  # expect: TL404
                correct = (model(x.to(device)).argmax(1) == y.to(device)).sum()
            return correct / len(loader)


        def load(model, path):
            model.load_state_dict(torch.load(path))
        """,
        devices={"x": UNKNOWN, "y": UNKNOWN, "torch.randn(x.shape)": UNKNOWN},
        steps={"optimizer.step()": True},
    ),
    Row(
        "a library's epoch loop measuring the training set again, twice (TL410)",
        """
        def fit(model, loader, optimizer, epochs, device):
            for epoch in range(epochs):
                model.train()
                for x, y in loader:
                    loss = F.cross_entropy(model(x.to(device)), y.to(device))
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                model.eval()
                with torch.no_grad():
                    print(evaluate(model, loader, device))  # expect: TL410
                    for x, y in loader:  # expect: TL410
                        print(F.cross_entropy(model(x.to(device)), y.to(device)))


        def evaluate(model, loader, device):
            correct = 0
            for x, y in loader:
                correct += (model(x.to(device)).argmax(1) == y.to(device)).sum()
            return correct
        """,
        steps={"optimizer.step()": True},
    ),
    Row(
        "an EMA of the weights updated tensor by tensor every step (TL411)",
        """
        import copy

        model = Net().cuda()  # expect: TL606
        ema = copy.deepcopy(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:  # expect: TL501, TL503, TL601
            loss = F.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                for p_ema, p in zip(ema.parameters(), model.parameters()):  # expect: TL411
                    p_ema.lerp_(p, 0.001)
        """,
        steps={"optimizer.step()": True},
    ),
    Row(
        "a GAN's discriminator loss on the generator's output, not detached (TL412)",
        """
        G = Net().cuda()  # expect: TL606
        D = Net().cuda()
        opt_G = torch.optim.SGD(G.parameters(), lr=0.1)  # expect: TL605
        opt_D = torch.optim.SGD(D.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for x, _ in loader:  # expect: TL501, TL503, TL601
            x = x.cuda(non_blocking=True)
            fake = G(torch.randn_like(x))
            d_loss = D(fake).mean() - D(x).mean()  # expect: TL412
            opt_D.zero_grad()
            d_loss.backward()
            opt_D.step()
            g_loss = -D(G(torch.randn_like(x))).mean()
            opt_G.zero_grad()
            g_loss.backward()
            opt_G.step()
        """,
        models={"G": NETWORK, "D": NETWORK},
        steps={"opt_D.step()": True, "opt_G.step()": True},
    ),
    Row(
        "a teacher no optimizer trains, its weights never frozen, in the loss (TL414)",
        """
        teacher = Net().cuda()  # expect: TL606
        student = Net().cuda()
        frozen = Net().cuda()
        frozen.requires_grad_(False)
        optimizer = torch.optim.SGD(student.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for x, _ in loader:  # expect: TL501, TL503, TL601
            x = x.cuda(non_blocking=True)
            target = teacher(x)  # expect: TL414
            loss = F.mse_loss(student(x), target) + F.mse_loss(student(x), frozen(x))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        models={"teacher": NETWORK, "student": NETWORK},
        steps={"optimizer.step()": True},
    ),
    Row(
        "a memory monitor thread beside a step loop that never waits (TL413); one waiting on its "
        "Event is silent",
        """
        import threading


        def track(stop, stats):
            while not stop.is_set():  # expect: TL413
                stats["peak"] = max(stats["peak"], torch.cuda.memory_allocated())


        def sample(stop, stats):
            while not stop.wait(0.1):
                stats["reserved"] = torch.cuda.memory_reserved()


        model = Net().cuda()  # expect: TL606
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        stop, stats = threading.Event(), {"peak": 0}
        threading.Thread(target=track, args=(stop, stats), daemon=True).start()
        threading.Thread(target=sample, args=(stop, stats), daemon=True).start()
        for x, y in loader:  # expect: TL501, TL503, TL601
            loss = F.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        stop.set()
        """,
        steps={"optimizer.step()": True},
    ),
    Row(
        "a frozen teacher outside the step's autocast region (TL504)",
        """
        teacher = Net().cuda()  # expect: TL604, TL606
        teacher.requires_grad_(False)
        student = Net().cuda()  # expect: TL604
        optimizer = torch.optim.SGD(student.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for x, _ in loader:  # expect: TL601
            x = x.cuda(non_blocking=True)
            with torch.no_grad():
                target = teacher(x)  # expect: TL504
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.mse_loss(student(x), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        models={"teacher": NETWORK, "student": NETWORK},
        steps={"optimizer.step()": True},
    ),
    Row(
        "a frozen backbone recomputing the same features every epoch (TL415)",
        """
        import torchvision

        backbone = Net().cuda()  # expect: TL606
        backbone.eval()
        head = nn.Linear(10, 10).cuda()
        optimizer = torch.optim.SGD(head.parameters(), lr=0.1)  # expect: TL605
        plain = torchvision.datasets.CIFAR10(".", transform=torchvision.transforms.ToTensor())
        loader = DataLoader(plain, batch_size=256, num_workers=4, pin_memory=True)  # expect: TL203
        for epoch in range(30):  # expect: TL503, TL601
            for x, y in loader:  # expect: TL501
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
                with torch.no_grad():
                    features = backbone(x)  # expect: TL415
                loss = F.cross_entropy(head(features), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        models={"backbone": NETWORK, "head": NETWORK},
        steps={"optimizer.step()": True},
    ),
    Row(
        "torch.compile's result thrown away, and compiling in the loop (TL607)",
        """
        model = Net().cuda()  # compiled, if uselessly: not TL606's
        torch.compile(model)  # expect: TL607
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        for x, y in loader:  # expect: TL501, TL503, TL601
            net = torch.compile(model)  # expect: TL607
            loss = F.cross_entropy(net(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        steps={"optimizer.step()": True},
    ),
    Row(
        "the same loop given the CPU by a visible call: no accelerator to presume",
        """
        def train_one_epoch(model, loader, optimizer, device):
            total = 0.0
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                noise = torch.randn(x.shape).to(device)
                loss = F.cross_entropy(model(x + noise), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss  # expect: TL403
                print(loss.item())
            return total / len(list(loader))  # expect: TL205


        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(dataset, batch_size=64, num_workers=4)
        train_one_epoch(model, loader, optimizer, "cpu")
        """,
        devices={"x": CPU, "torch.randn(x.shape)": CPU},
        models={"model": NETWORK},
    ),
    Row(
        "debugging left on, a checkpoint and a CNN whose bias the batch norm cancels",
        """
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 64, 3)  # expect: TL603
                self.bn = nn.BatchNorm2d(64)
                self.features = nn.Sequential(nn.Conv2d(64, 64, 3, bias=False), nn.BatchNorm2d(64))
                self.head = nn.Conv2d(64, 10, 1)

            def forward(self, x):
                return self.head(F.relu(self.features(self.bn(self.conv(x))))).mean((2, 3))


        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"  # expect: TL409
        if os.environ.get("DEBUG"):
            os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
        model = Block().to(device)  # a 40k-parameter toy: no TL606, no TL501
        model.load_state_dict(torch.load("pretrained.pt"))  # expect: TL106
        head = torch.load("head.pt", map_location=device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # expect: TL605
        loader = DataLoader(
            dataset, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True
        )
        probe = DataLoader(dataset, batch_size=64, persistent_workers=True)  # expect: TL204
        torch.autograd.gradcheck(F.relu, (torch.randn(4, dtype=torch.double, requires_grad=True),))
        with torch.autograd.profiler.profile() as prof:  # expect: TL407
            for epoch in range(3):  # expect: TL601
                for x, y in loader:
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                    probe_x = x.double().requires_grad_()
                    torch.autograd.gradcheck(F.relu, (probe_x,))  # expect: TL408
                    loss = F.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        schedule = torch.profiler.schedule(wait=1, warmup=1, active=3)
        with torch.profiler.profile(schedule=schedule) as prof:
            for step, (x, y) in enumerate(loader):
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                if step % 100 == 0:
                    torch.autograd.gradcheck(F.relu, (x.double().requires_grad_(),))
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                prof.step()
        """,
        devices={"Block()": CUDA, "x": CUDA, "y": CUDA},
        models={"model": NETWORK},
    ),
    Row(
        "a sampling loop that runs the network on the whole sequence it grows (TL609)",
        """
        model = Net().cuda().eval()
        idx = torch.zeros(1, 1, dtype=torch.long, device="cuda")
        with torch.no_grad():
            for _ in range(32):
                logits = model(idx)  # expect: TL609
                idx = torch.cat((idx, logits[:, -1:].argmax(-1)), dim=1)
            for _ in range(32):
                logits = model(idx[:, -1:])
                idx = torch.cat((idx, logits[:, -1:].argmax(-1)), dim=1)
        """,
        devices={"Net()": CUDA},
        models={"model": NETWORK},
    ),
]


def source(row: Row) -> str:
    return HEADER + textwrap.dedent(row.code).lstrip("\n")


def expected(text: str) -> set[tuple[int, str]]:
    marks = set()
    for number, line in enumerate(text.splitlines(), 1):
        m = EXPECT.search(line)
        if m:
            marks.update((number, c.strip()) for c in m.group("codes").split(","))
    return marks


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_findings(row: Row):
    text = source(row)
    linter = Linter(instantiate(RULES), Settings(options=default_options()))
    found = {(v.line, v.code) for v in linter.lint(text, "row.py")}
    assert found == expected(text)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_classification(row: Row):
    module = build(cst.parse_module(source(row)))
    text = module.module.code_for_node
    for receiver, kind in row.devices.items():
        moves = [c for c in module.method_calls("to", "cuda") if text(c.receiver) == receiver]
        assert moves, receiver
        assert {module.devices.move(c).kind for c in moves} == {kind}, receiver
    by_name = {site.name: site.kind for site in module.models.sites}
    for name, kind in row.models.items():
        assert by_name.get(name) is kind, name
    for call_text, is_step in row.steps.items():
        calls = [c for c in module.calls if text(c.node) == call_text]
        assert calls and all(module.training.is_step(c) is is_step for c in calls), call_text


def test_every_rule_reports_somewhere():
    reported = {code for row in ROWS for _, code in expected(source(row))}
    assert reported == set(RULES)


def test_every_rule_is_in_the_table_or_said_not_to_be():
    elsewhere = ("TL7", "TL9")  # the framework and the meta rules
    outside = {c for c in builtin_rules() if c not in RULES and not c.startswith(elsewhere)}
    assert outside == CALLS_ONLY
