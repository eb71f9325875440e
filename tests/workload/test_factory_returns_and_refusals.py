"""A new user's second trial: what a factory may return (keyword inputs, a torch.compile'd module, several outputs
without a loss_fn), the refusals of models gpuwise does not build (quantized torchvision models, a transformers
config that is no decoder), the suggestions for a torchvision typo, and the image side a job records."""

from __future__ import annotations

import json
import textwrap

import pytest

from gpuwise.trace import trace_workload
from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.specs import resolve_model_spec

MODELS = textwrap.dedent('''
    import torch
    from torch import nn

    class Audio(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(20, 32)
            self.head = nn.Linear(32, 7)
        def forward(self, *, input_features, labels):      # keyword-only, as transformers' audio models
            logits = self.head(torch.relu(self.enc(input_features)))
            return nn.functional.cross_entropy(logits, labels)

    def keywords(batch_size: int = 3):
        return Audio(), {"input_features": torch.empty(batch_size, 20),
                         "labels": torch.zeros(batch_size, dtype=torch.long)}, lambda loss: loss

    def keywords_no_batch_size():
        return Audio(), {"input_features": torch.empty(3, 20), "labels": torch.zeros(3, dtype=torch.long)}, \\
            lambda loss: loss

    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(16, 16)
            self.cls = nn.Linear(16, 5)
            self.reg = nn.Linear(16, 1)
        def forward(self, x):
            h = torch.relu(self.body(x))
            return {"logits": self.cls(h), "reg": self.reg(h)}

    def heads(batch_size: int = 2):
        return Heads(), (torch.empty(batch_size, 16),)

    def compiled(batch_size: int = 2):
        return torch.compile(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))), \\
            (torch.empty(batch_size, 16),)
''')


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(MODELS)
    return path


def _grad_bytes(trace) -> int:
    return sum(e.size_bytes for e in trace.events if e.kind == "alloc" and e.category == "gradients"
               and e.op_index >= 0)


def test_a_dict_of_example_inputs_is_passed_as_keyword_arguments(models):
    trace = trace_workload(Workload(model=f"{models}:keywords", batch_size=4, optimizer="sgd"))
    # the factory's batch_size, given to forward as input_features
    assert any((4, 20) in op.input_shapes for op in trace.ops if op.module == "enc")


def test_keyword_inputs_get_the_batch_size_when_the_factory_takes_none(models):
    trace = trace_workload(Workload(model=f"{models}:keywords_no_batch_size", batch_size=5, optimizer="sgd"))
    assert any("input 'input_features' (3, 20) -> (5, 20)" in n for n in trace.notes)
    assert any((5, 20) in op.input_shapes for op in trace.ops if op.module == "enc")


def test_without_a_loss_fn_every_output_head_trains_and_the_loss_is_said(models):
    trace = trace_workload(Workload(model=f"{models}:heads", batch_size=2, optimizer="sgd"))
    # every trainable parameter got a gradient in the measured step: the reg head too, not only 'logits'
    assert _grad_bytes(trace) == 4 * trace.trainable_param_count
    note = next(n for n in trace.notes if n.startswith("no loss_fn"))
    assert "cross-entropy on 'logits' (2, 5)" in note and "mean squared error on 'reg' (2, 1)" in note


def test_a_torch_compiled_module_is_traced_as_the_module_it_wraps_and_compile_is_suggested(models):
    trace = trace_workload(Workload(model=f"{models}:compiled", batch_size=2, optimizer="sgd"))
    assert not any(op.module.startswith("_orig_mod") for op in trace.ops)
    assert any("torch.compile'd" in n and "--compile" in n for n in trace.notes)


def test_a_quantized_torchvision_model_is_refused_as_quantized_not_as_video():
    with pytest.raises(WorkloadError) as info:
        resolve_model_spec("torchvision:quantized_resnet50")
    message = str(info.value)
    assert "quantized" in message and "CPU only" in message and "torchvision:resnet50" in message
    assert "video" not in message


def test_a_torchvision_typo_suggests_the_detection_names_it_resembles():
    with pytest.raises(WorkloadError, match=r"did you mean: torchvision:fasterrcnn_resnet50_fpn"):
        resolve_model_spec("torchvision:fasterrcnn")


def test_a_config_without_architectures_is_refused_by_its_model_type_not_as_a_decoder(tmp_path):
    config = {"model_type": "segformer", "num_channels": 3, "num_encoder_blocks": 4, "depths": [1, 1, 1, 1],
              "hidden_sizes": [8, 16, 16, 16], "num_attention_heads": [1, 1, 1, 1], "decoder_hidden_size": 16}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(WorkloadError) as info:
        trace_workload(Workload(model=f"hf:{path}", batch_size=2, optimizer="sgd"))
    message = str(info.value)
    assert "AutoModelForCausalLM" not in message
    assert "model_type 'segformer'" in message and "AutoModelForSemanticSegmentation" in message
    assert '"architectures": ["SegformerForImageClassification"]' in message


@pytest.mark.parametrize("model, side", [("torchvision:resnet18", 224), ("torchvision:inception_v3", 299),
                                         ("hf:google/vit-base-patch16-224", 224)])
def test_a_vision_job_records_the_image_side_it_runs_at(model, side):
    assert Workload(model=model).with_factory_sizes().image_size == side
    assert Workload(model=model, image_size=160).with_factory_sizes().image_size == 160
    assert Workload(model="hf:bert-base-uncased").with_factory_sizes().image_size is None
