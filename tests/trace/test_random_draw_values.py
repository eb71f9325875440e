"""A random number read with .item() is answered at the middle of the draw's range (docs/trace.md), in-place
draws and draws passed through arithmetic too: torchvision detection picks a size with
``int(torch.empty(1).uniform_(0, n).item())``, and 1.0 indexed past its list."""

from __future__ import annotations

import textwrap

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload

WIDTHS = (16, 24, 32, 48, 64)

MODELS = textwrap.dedent('''
    import torch
    from torch import nn

    class Pick(nn.Module):
        """One of five layers, chosen by a random index drawn as ``draw`` says."""
        def __init__(self, draw):
            super().__init__()
            self.draw = draw
            self.layers = nn.ModuleList(nn.Linear(8, w) for w in (16, 24, 32, 48, 64))
        def forward(self, x):
            return self.layers[int(self.draw(len(self.layers)))](x)

    def uniform_in_place(batch_size: int = 4):   # torchvision's GeneralizedRCNNTransform.torch_choice
        return Pick(lambda n: torch.empty(1).uniform_(0.0, float(n)).item()), (torch.empty(batch_size, 8),)

    def rand_times_n(batch_size: int = 4):
        return Pick(lambda n: torch.rand(1).mul(n).item()), (torch.empty(batch_size, 8),)

    def rand_through_arithmetic(batch_size: int = 4):
        return Pick(lambda n: (torch.rand(1) * (n - 1) + 0.5).floor().long().item()), (torch.empty(batch_size, 8),)

    def randint(batch_size: int = 4):
        return Pick(lambda n: torch.randint(0, n, (1,)).item()), (torch.empty(batch_size, 8),)
''')


def _chosen_width(tmp_path, factory: str) -> int:
    path = tmp_path / "draws.py"
    path.write_text(MODELS)
    trace = trace_workload(Workload(model=f"{path}:{factory}", batch_size=4, mode="infer"))
    widths = {shape[-1] for op in trace.ops if op.op.startswith("aten.addmm") for shape in op.output_shapes}
    (width,) = widths
    return width


@pytest.mark.parametrize("factory, middle", [
    ("uniform_in_place", (0 + 5) / 2),            # uniform_(0, 5)
    ("rand_times_n", 0.5 * 5),                    # rand's middle 0.5, times 5
    ("rand_through_arithmetic", (0.5 * 4 + 0.5) // 1),
    ("randint", (0 + 5 - 1) // 2),                # randint(0, 5): 0 … 4
])
def test_a_draw_read_with_item_is_the_middle_of_its_range(tmp_path, factory, middle):
    assert _chosen_width(tmp_path, factory) == WIDTHS[int(middle)]
