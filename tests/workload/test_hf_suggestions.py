"""An unknown hf: id offline is answered with the shipped ids close to it, or none: ``hf:EleutherAI/pythia-70m``
was offered Mistral-7B (the "hf:" both sides share made every id look alike)."""

from __future__ import annotations

import pytest

from gpuwise.workload import WorkloadError, hub
from gpuwise.workload.specs import resolve_model_spec


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    """Offline with an empty Hub cache and a scratch home."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub._hub_config.cache_clear()
    yield
    hub._hub_config.cache_clear()


def _refusal(name: str) -> str:
    with pytest.raises(WorkloadError) as e:
        resolve_model_spec(f"hf:{name}")
    return str(e.value)


@pytest.mark.parametrize("name", ["EleutherAI/pythia-70m", "EleutherAI/gpt-neo-125m", "bigscience/bloom-560m",
                                  "tiiuae/falcon-7b"])
def test_an_id_like_no_shipped_one_gets_no_suggestion(no_hub, name):
    said = _refusal(name)
    assert said.startswith(f"unknown model hf:{name} (") and "did you mean" not in said, said
    assert said.endswith("pass hf:path/to/config.json for others")


@pytest.mark.parametrize("name, first", [
    ("microsoft/phi-2", "hf:microsoft/phi-4"),
    ("Qwen/Qwen2.5-8B", "hf:Qwen/Qwen2.5-7B"),
    ("gpt2-mediun", "hf:gpt2-medium"),
])
def test_an_id_close_to_shipped_ones_is_offered_them_to_paste_back(no_hub, name, first):
    assert f"(did you mean: {first}" in _refusal(name)
