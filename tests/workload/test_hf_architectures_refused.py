"""A transformers config whose architecture gpuwise cannot build with the right inputs (audio, image-text) is
refused in one short line naming it, never traced as another model (Whisper as WhisperForCausalLM)."""

from __future__ import annotations

import json

import pytest

from gpuwise.workload import WorkloadError
from gpuwise.workload.specs import CAUSAL_LM, SEQ2SEQ_LM, resolve_model_spec

WHISPER = {"model_type": "whisper", "vocab_size": 51865, "num_mel_bins": 80, "d_model": 64, "encoder_layers": 2,
           "decoder_layers": 2, "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 128,
           "decoder_ffn_dim": 128, "max_source_positions": 1500, "max_target_positions": 448,
           "architectures": ["WhisperForConditionalGeneration"]}
CONFIGS = {
    "whisper": WHISPER,
    "whisper-enc-dec": {**WHISPER, "is_encoder_decoder": True},
    "clip": {"model_type": "clip", "projection_dim": 64, "architectures": ["CLIPModel"],
             "text_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}},
    "wav2vec2": {"model_type": "wav2vec2", "vocab_size": 32, "hidden_size": 64, "num_hidden_layers": 2,
                 "num_attention_heads": 2, "intermediate_size": 128, "architectures": ["Wav2Vec2ForCTC"]},
}


def _write(tmp_path, name, config) -> str:
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(config))
    return f"hf:{path}"


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_an_architecture_gpuwise_cannot_feed_is_refused_in_one_short_line(tmp_path, name):
    spec = _write(tmp_path, name, CONFIGS[name])
    with pytest.raises(WorkloadError) as info:
        resolve_model_spec(spec)
    message = str(info.value)
    assert CONFIGS[name]["architectures"][0] in message and "file.py:factory" in message
    assert "\n" not in message and len(message) < 400


def test_text_encoder_decoders_and_decoders_still_resolve(tmp_path):
    t5 = {"model_type": "t5", "d_model": 64, "num_layers": 2, "num_heads": 2, "vocab_size": 100,
          "architectures": ["T5ForConditionalGeneration"], "is_encoder_decoder": True}
    assert resolve_model_spec(_write(tmp_path, "t5", t5)).task == SEQ2SEQ_LM
    assert resolve_model_spec("hf:gpt2").task == CAUSAL_LM
    # a multimodal LLM's text decoder is the closed form's (docs/llm.md), not refused
    assert resolve_model_spec("hf:google/gemma-3-4b-pt").task == CAUSAL_LM
