"""User model factories for the tracer's tests (the file.py:factory model spec)."""

import torch
from torch import nn


class Mlp(nn.Module):
    def __init__(self, width: int = 256) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.backbone(x))


def mlp():
    """Module only: the tracer guesses a (batch, 64) input from the first Linear."""
    return Mlp()


def mlp_with_inputs(batch_size: int = 8):
    return Mlp(), (torch.empty(batch_size, 64),), lambda out: out.float().pow(2).mean()


def frozen_backbone():
    model = Mlp()
    for p in model.backbone.parameters():
        p.requires_grad_(False)
    return model, torch.empty(4, 64)


def broken():
    raise ValueError("no such checkpoint: weights.bin")


class Dedup(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return self.proj(torch.unique(x, dim=0))   # output size depends on the values


def data_dependent():
    return Dedup(), torch.empty(4, 8)


class Computed(nn.Module):
    """Derives its layer widths with torch ops at construction, as torchvision's RegNet does."""

    def __init__(self) -> None:
        super().__init__()
        widths = (torch.arange(3) * 16 + 16).tolist()
        self.layers = nn.Sequential(*[nn.Linear(a, b) for a, b in zip([8] + widths[:-1], widths)])

    def forward(self, x):
        return self.layers(x)


def computed_widths():
    return Computed(), torch.empty(2, 8)
