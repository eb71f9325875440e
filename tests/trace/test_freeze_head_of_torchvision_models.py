"""--finetune freeze (linear probing) on torchvision models whose blocks are not numbered (DenseNet's
``denselayer1``, Inception's ``Mixed_5b``) or whose last layers repeat (VGG's classifier of linears, a
segmentation head's convolutions). Before, DenseNet and Inception trained every parameter (a full fine-tune
under the name "freeze") and VGG, MobileNetV3 and DeepLabV3 were refused as having no head."""

from __future__ import annotations

import pytest
import torch
import torchvision.models as tvm

from gpuwise.trace.peft import apply_finetune
from gpuwise.workload import Workload


def _trained(name: str, **kwargs) -> set[str]:
    with torch.device("meta"):
        module = tvm.get_model(name, weights=None, **kwargs)
    apply_finetune(module, Workload(f"torchvision:{name}", finetune="freeze"))
    return {n for n, p in module.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("name, head", [
    ("densenet121", {"features.norm5.weight", "features.norm5.bias", "classifier.weight", "classifier.bias"}),
    ("inception_v3", {"fc.weight", "fc.bias"}),
    ("googlenet", {"fc.weight", "fc.bias"}),
])
def test_blocks_named_without_numbers_are_frozen(name, head):
    kwargs = {} if name == "densenet121" else {"init_weights": False}   # silences their init-change warning
    assert _trained(name, **kwargs) == head


@pytest.mark.parametrize("name, head", [
    ("vgg16", {"classifier.6.weight", "classifier.6.bias"}),
    ("mobilenet_v3_large", {"classifier.3.weight", "classifier.3.bias"}),
    ("deeplabv3_resnet50", {"classifier.4.weight", "classifier.4.bias"}),
])
def test_a_model_whose_last_layers_repeat_trains_its_last_layer(name, head):
    kwargs = {"weights_backbone": None} if name.startswith("deeplab") else {}
    assert _trained(name, **kwargs) == head
