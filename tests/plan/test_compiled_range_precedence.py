"""The compiled range (timm's -dynamo rows: CNN and ViT inference on whole GPUs) is not given to a compiled step
that no such run measures: one on a MIG slice or with LSTM layers keeps its own regime, as its eager step does.

Before: ``predict_step_time`` named a compiled step "compiled" ahead of "rnn" and "mig"; harmless while the
compiled regime had no range, but since the twentieth session's rows ship one, `estimate torchvision:resnet50
--mode infer --compile --gpu a100-80gb-sxm4-mig-3g.40gb` printed the whole GPUs' compiled range for a slice whose
rates are scaled from the whole GPU's, and a compiled LSTM got the CNNs' range.
"""

from __future__ import annotations

import pytest

from gpuwise.plan.accuracy import why_no_range

INFER = ["--mode", "infer", "--precision", "amp-fp16", "--compile", "--json"]


def _no_range(time: dict, regime: str) -> None:
    assert time["regime"] == regime and time["likely_step_time_range_s"] is None
    assert time["likely_range_note"] == why_no_range(regime)


def test_a_compiled_step_on_a_mig_slice_keeps_the_slice_s_regime(cli_json):
    whole = cli_json(["estimate", "torchvision:resnet50", "--batch-size", "64", "--gpu", "a100-80gb-sxm4", *INFER])
    assert whole["time"]["regime"] == "compiled" and whole["time"]["likely_step_time_range_s"] is not None
    sliced = cli_json(["estimate", "torchvision:resnet50", "--batch-size", "64", "--gpu",
                       "a100-80gb-sxm4-mig-3g.40gb", *INFER])
    _no_range(sliced["time"], "mig")


@pytest.fixture
def lstm_spec(tmp_path):
    path = tmp_path / "rnn_models.py"
    path.write_text("import torch\nfrom torch import nn\n\n\n"
                    "class Net(nn.Module):\n"
                    "    def __init__(self):\n"
                    "        super().__init__()\n"
                    "        self.rnn = nn.LSTM(16, 256, num_layers=2, batch_first=True)\n"
                    "        self.head = nn.Linear(256, 4)\n\n"
                    "    def forward(self, x):\n"
                    "        return self.head(self.rnn(x)[0])\n\n\n"
                    "def lstm(batch_size=8, seq_len=20):\n"
                    "    return Net(), (torch.zeros(batch_size, seq_len, 16),)\n")
    return f"{path}:lstm"


def test_a_compiled_lstm_keeps_the_rnn_regime(cli_json, lstm_spec):
    out = cli_json(["estimate", lstm_spec, "--batch-size", "256", "--gpu", "a100-80gb-sxm4", *INFER])
    _no_range(out["time"], "rnn")


def test_a_compiled_step_the_host_shapes_is_small_batch_without_the_big_batch_range(cli_json):
    # the -dynamo rows ran at batch 1,024-2,048: a compiled step at batch 1, whose host issue time is at least half
    # the GPU's, is not what they measure
    out = cli_json(["estimate", "torchvision:resnet18", "--mode", "infer", "--batch-size", "1", "--compile",
                    "--gpu", "h100-sxm", "--json"])
    assert out["time"]["regime"] == "small-batch" and out["time"]["likely_step_time_range_s"] is None
