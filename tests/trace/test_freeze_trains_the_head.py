"""--finetune freeze trains the head (what turns the trunk's output into the model's) and nothing below it:
a classifier's classifier, a ViT's final norm and head, an LM's final norm and LM head; found by structure."""

from __future__ import annotations

import pytest
import timm
import torch
from transformers import BertConfig, BertForSequenceClassification, LlamaConfig, LlamaForCausalLM

from gpuwise.trace.peft import apply_finetune
from gpuwise.workload import Workload


def _trained(build, model: str) -> set[str]:
    with torch.device("meta"):
        module = build()
    apply_finetune(module, Workload(model, finetune="freeze"))
    return {n for n, p in module.named_parameters() if p.requires_grad}


def _small_bert():
    return BertForSequenceClassification(BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                                                    intermediate_size=128, num_labels=3))


def test_a_sequence_classifier_trains_its_classifier_not_its_embeddings():
    # the defect: 1,536 trainable parameters, bert.embeddings.LayerNorm (the bottom of the network)
    trained = _trained(_small_bert, "hf:bert-base-uncased")
    assert {"classifier.weight", "classifier.bias"} <= trained
    assert not any(n.startswith(("bert.embeddings", "bert.encoder")) for n in trained), trained


@pytest.mark.parametrize("name", ["vit_tiny_patch16_224", "convnext_tiny"])
def test_a_timm_classifier_trains_its_classifier_and_final_norm_only(name):
    with torch.device("meta"):
        module = timm.create_model(name)
    apply_finetune(module, Workload(f"timm:{name}", finetune="freeze"))
    # the defect: only the final norm (1,536 parameters) trained, the classifier frozen
    assert all(p.requires_grad for p in module.get_classifier().parameters())
    trained = {n for n, p in module.named_parameters() if p.requires_grad}
    assert any("norm" in n for n in trained), trained
    assert not any(n.startswith(("blocks", "stages", "patch_embed", "stem")) for n in trained), trained


def test_a_decoder_still_trains_its_final_norm_and_lm_head():
    trained = _trained(lambda: LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                                                            intermediate_size=128, vocab_size=100)), "hf:llama")
    assert trained == {"model.norm.weight", "lm_head.weight"}


class _BlocksThenOut(torch.nn.Module):
    """A user's model: repeated blocks, then an output layer."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))
        self.out = torch.nn.Linear(8, 2)


def test_the_head_of_a_user_model_is_what_follows_its_repeated_blocks():
    trained = _trained(_BlocksThenOut, "m.py:f")
    assert trained == {"out.weight", "out.bias"}
