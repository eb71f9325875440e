"""A setting that changes nothing in the job is said, not silently dropped (before: no word at all)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuwise.workload.model import Workload


@pytest.mark.parametrize("changes, flag", [
    (dict(mode="infer", grad_accum_steps=4), "--grad-accum"),
    (dict(mode="infer", grad_checkpointing=True), "--grad-checkpointing"),
    (dict(mode="infer", optimizer="sgd"), "--optimizer sgd"),
    (dict(mode="infer", keep_grads=True), "--keep-grads"),
    (dict(max_new_tokens=64), "--max-new-tokens"),
    (dict(engine="vllm"), "--engine vllm"),
    (dict(lora_rank=8), "--lora-rank"),
    (dict(lora_targets=("q_proj",)), "--lora-targets"),
    (dict(lora_dropout=0.1), "--lora-dropout"),
])
def test_each_inert_setting_is_named(changes, flag):
    messages = Workload(model="hf:gpt2", **changes).inert_settings()
    assert len(messages) == 1 and messages[0].startswith(flag), messages


@pytest.mark.parametrize("changes", [
    {},                                                     # defaults say nothing
    dict(mode="infer", optimizer="none"),                   # the right optimizer for inference
    dict(mode="infer", max_new_tokens=128, engine="vllm"),  # serving settings in serving
    dict(finetune="lora", lora_rank=8, lora_dropout=0.0, lora_targets=("q_proj",)),
    dict(finetune="qlora", lora_rank=64),
    dict(grad_accum_steps=4, grad_checkpointing=True, optimizer_impl="fused", keep_grads=True),
])
def test_settings_that_matter_are_not_reported(changes):
    assert Workload(model="hf:gpt2", **changes).inert_settings() == ()


def test_the_cli_warns_on_stderr_and_still_answers():
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwise.cli.app", "estimate", "hf:Qwen/Qwen2.5-14B", "--precision", "bf16",
         "--seq-len", "2048", "--batch-size", "1", "--lora-rank", "8", "--json"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "gpuwise: warning: --lora-rank has no effect without --finetune lora or qlora" in proc.stderr
    assert proc.stdout.lstrip().startswith("{")      # --json's stdout stays one JSON object


def test_a_bad_grad_accum_names_the_option_the_user_typed():
    # the error said --grad-accum-steps, an option no command has
    from gpuwise.workload.model import WorkloadError

    with pytest.raises(WorkloadError, match=r"^--grad-accum must be"):
        Workload(model="hf:gpt2", grad_accum_steps=0)


def test_a_sequence_past_the_model_s_context_and_an_image_size_on_a_text_model_are_noted():
    # --seq-len 1000000 on a 32k-context model and --image-size on an LLM passed without a word
    from gpuwise.plan.llm import estimate_llm

    notes = estimate_llm(Workload(model="hf:Qwen/Qwen2.5-7B", finetune="lora", seq_len=1_000_000, batch_size=1,
                                  image_size=224, precision="bf16")).notes
    assert any("past hf:Qwen/Qwen2.5-7B's context" in n for n in notes), notes
    assert "--image-size has no effect on a text model" in notes
    ok = estimate_llm(Workload(model="hf:Qwen/Qwen2.5-7B", finetune="lora", seq_len=2048, batch_size=1,
                               precision="bf16")).notes
    assert not any("context of" in n or "image-size" in n for n in ok)


def test_offload_on_a_traced_model_is_said_to_change_nothing(caplog):
    import logging

    from gpuwise.plan.profile import TracedModel

    logger = logging.getLogger("gpuwise.plan.profile")
    logger.addHandler(caplog.handler)   # the CLI's handler may have stopped propagation to the root
    try:
        TracedModel(Workload(model="torchvision:resnet18", offload="optimizer"))
    finally:
        logger.removeHandler(caplog.handler)
    assert any("--offload optimizer is modelled for decoder LLMs" in r.getMessage() for r in caplog.records)


def test_the_engine_default_is_the_workloads_so_the_api_and_the_cli_agree():
    """Was: the CLI chose vLLM at --request-rate while Workload(...) at a rate served with HF generate."""
    at_rate = Workload(model="hf:gpt2", mode="infer", max_new_tokens=16, request_rate_per_s=2.0)
    assert at_rate.engine == "vllm" and at_rate.engine_default
    assert at_rate.with_(batch_size=4).engine == "vllm"
    one_batch = Workload(model="hf:gpt2", mode="infer", max_new_tokens=16)
    assert one_batch.engine == "hf" and one_batch.engine_default
    chosen = Workload(model="hf:gpt2", mode="infer", max_new_tokens=16, request_rate_per_s=2.0, engine="hf")
    assert chosen.engine == "hf" and not chosen.engine_default
    assert Workload(model="hf:gpt2", engine="hf").inert_settings() == ()      # the training default, given


@pytest.mark.parametrize("changes, said", [
    (dict(finetune="lora"), "--finetune lora has no effect with --mode infer"),
    (dict(sharding="zero3"), "--sharding zero3 has no effect with --mode infer"),
    (dict(offload="params"), "--offload params has no effect with --mode infer"),
    (dict(logits="chunked"), "--logits chunked has no effect with --mode infer"),
    (dict(finetune="qlora"), "--finetune qlora with --mode infer serves the base weights in nf4"),
])
def test_training_settings_in_serving_are_the_workloads_to_say(changes, said):
    (message,) = Workload(model="hf:gpt2", mode="infer", **changes).inert_settings()
    assert message.startswith(said), message


@pytest.mark.parametrize("model, changes, flag", [
    ("hf:google/vit-base-patch16-224", dict(seq_len=4096), "--seq-len"),      # was silently ignored, yet recorded
    ("torchvision:resnet50", dict(seq_len=512), "--seq-len"),
    ("hf:bert-base-uncased", dict(image_size=512), "--image-size"),
    ("hf:gpt2", dict(image_size=384), "--image-size"),
])
def test_an_input_size_of_the_other_kind_is_named(model, changes, flag):
    w = Workload(model=model, **changes)
    (message,) = w.inert_settings()
    assert message.startswith(f"{flag} has no effect") and list(w.inputs_it_ignores()) == list(changes)


@pytest.mark.parametrize("model, changes", [
    ("hf:google/vit-base-patch16-224", dict(image_size=384)),
    ("hf:bert-base-uncased", dict(seq_len=512)),
])
def test_an_input_size_of_the_models_own_kind_is_not_reported(model, changes):
    assert Workload(model=model, **changes).inert_settings() == ()
