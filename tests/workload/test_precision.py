"""One home for what a precision means (issue 23 item 1): the Precision value, the one rate key that
calibration and the time model share, and the one default rule every command applies per GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise.calibrate.fit import class_key
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.plan.profile import TracedModel
from gpuwise.runtime.kernels import op_features
from gpuwise.trace.records import OpRecord
from gpuwise.workload import Workload
from gpuwise.workload.precision import NAMES, default_precision, parse, runs_on

CATALOG = load_catalog(user_file=False)
A100 = resolve_gpu(CATALOG, "a100-80gb-sxm4")
T4 = resolve_gpu(CATALOG, "t4")
V100 = resolve_gpu(CATALOG, "v100-32gb-sxm2")


def test_the_six_names_mean_what_design_says():
    assert [parse(n).name for n in NAMES] == ["fp32", "tf32", "amp-fp16", "amp-bf16", "fp16", "bf16"]
    table = {n: (parse(n).amp, parse(n).compute_dtype, parse(n).master_bytes, parse(n).activation_bytes)
             for n in NAMES}
    assert table == {
        "fp32": (False, "float32", 4, 4), "tf32": (False, "float32", 4, 4),
        "amp-fp16": (True, "float16", 4, 2), "amp-bf16": (True, "bfloat16", 4, 2),
        "fp16": (False, "float16", 2, 2), "bf16": (False, "bfloat16", 2, 2),
    }
    assert [parse(n).fp16_twin.name for n in NAMES] == ["fp32", "tf32", "amp-fp16", "amp-fp16", "fp16", "fp16"]
    assert [n for n in NAMES if parse(n).needs_bf16] == ["amp-bf16", "bf16"]
    assert parse(" AMP-BF16 ") is parse("amp-bf16")
    with pytest.raises(ValueError):
        parse("fp8")


def _conv() -> OpRecord:
    return OpRecord(index=0, op="aten.convolution.default", phase="forward", module="conv1",
                    input_shapes=((32, 64, 56, 56), (64, 64, 3, 3)), input_dtypes=("float32", "float32"),
                    output_shapes=((32, 64, 56, 56),), output_dtypes=("float32",), flops=2 * 32 * 64 * 56 * 56 * 64 * 9,
                    bytes_read=0, bytes_written=0)


def test_calibration_keys_an_fp32_convolution_at_the_rate_the_time_model_runs_it():
    # the defect: runtime/rates.py keyed an fp32 conv as fp32 (calibration), runtime/kernels.py ran it at tf32
    conv = _conv()
    assert op_features(conv, A100, "fp32").rate == "tf32"
    assert class_key("conv", "fp32", A100) == "conv/tf32"
    assert class_key("matmul", "fp32", A100) == "matmul/fp32"         # cuBLAS: no TF32 unless --precision tf32
    assert op_features(conv, T4, "fp32").rate == "fp32" == class_key("conv", "fp32", T4).split("/")[1]
    # bf16 without bf16 tensor cores: one answer, emulated on CUDA cores (was fp32 in one, emulated in the other)
    assert parse("amp-bf16").rate_key(T4) == "bf16-emulated" == class_key("matmul", "amp-bf16", T4).split("/")[1]


def test_the_default_rule_is_the_checkpoints_half_precision_for_llms_whatever_the_method():
    for finetune in ("full", "freeze", "lora", "qlora"):
        assert default_precision(finetune=finetune, llm=True, checkpoint_dtype="bfloat16").name == "amp-bf16"
        assert default_precision(finetune=finetune, llm=True, checkpoint_dtype="bfloat16",
                                 gpu_has_bf16=False).name == "amp-fp16"
    assert default_precision(mode="infer", llm=True, checkpoint_dtype="bfloat16").name == "bf16"
    assert default_precision(llm=True, checkpoint_dtype="float16").name == "amp-fp16"
    assert default_precision(finetune="lora").name == "amp-bf16"       # LoRA of other models: bf16 autocast
    assert default_precision().name == default_precision(mode="infer").name == "fp32"   # PyTorch's default


def test_a_full_fine_tune_of_llama_3_8b_on_8_a100s_defaults_to_bf16_like_its_lora(cli_json):
    # the defect (issue 24): full fine-tune with ZeRO-3 defaulted to fp32 (10.5 days) while LoRA got bf16
    base = ["estimate", "hf:meta-llama/Meta-Llama-3-8B", "--num-gpus", "8", "--sharding", "zero3",
            "--gpu", "a100-80gb-sxm4", "--seq-len", "2048", "--batch-size", "1", "--json"]
    full = cli_json(base + ["--finetune", "full"])
    lora = cli_json(base + ["--finetune", "lora"])
    assert full["workload"]["precision"] == lora["workload"]["precision"] == "amp-bf16"
    assert full["workload"]["precision_default"] is True      # said in the output
    asked = cli_json(base + ["--finetune", "full", "--precision", "amp-bf16"])
    assert asked["workload"]["precision_default"] is False
    assert asked["time"]["step_time_s"] == pytest.approx(full["time"]["step_time_s"])


def test_estimate_on_every_gpu_runs_a_default_bf16_lora_at_fp16_on_a_t4_as_recommend_quotes_it(cli_json):
    # the defect: `estimate --gpu all` marked the T4 "cannot run" a LoRA job that `recommend` quoted at amp-fp16
    job = ["hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "1024", "--grad-checkpointing"]
    rows = {r["gpu"]: r for r in cli_json(["estimate", *job, "--batch-size", "1", "--gpu", "all", "--json"])["per_gpu"]}
    assert rows["t4"]["cannot_run"] is None and rows["t4"]["precision"] == "amp-fp16"
    assert rows["a100-80gb-sxm4"]["precision"] == "amp-bf16"
    one = cli_json(["estimate", *job, "--batch-size", "1", "--gpu", "t4", "--precision", "amp-fp16", "--json"])
    assert rows["t4"]["step_time_s"] == pytest.approx(one["time"]["step_time_s"])
    rec = cli_json(["recommend", *job, "--batch-size", "1", "--effective-batch", "1", "--samples", "1000",
                    "--gpus", "t4", "--max-gpus", "1", "--json"])
    assert rec["fallback_precision"] == {"t4": "amp-fp16"}
    (option,) = rec["options"]
    assert option["excluded_because"] is None or not option["excluded_because"].startswith("no bf16")
    # a precision the user names is kept: the T4 refuses it, in both commands
    named = cli_json(["estimate", *job, "--batch-size", "1", "--gpu", "all", "--precision", "amp-bf16", "--json"])
    assert {r["gpu"]: r["cannot_run"] for r in named["per_gpu"]}["t4"].startswith("no bf16")


def _tiny_llama(directory: Path, dtype: str) -> str:
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "vocab_size": 256, "max_position_embeddings": 512, "torch_dtype": dtype}
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config))
    return f"hf:{directory / 'config.json'}"


def test_the_traced_path_takes_precision_from_the_flags_not_the_configs_dtype(tmp_path, monkeypatch):
    # the defect: transformers builds from_config in the config's torch_dtype, so two configs that differ
    # only there gave different memory for identical flags (15.0 vs 22.7 GiB on a 1.1B shape)
    monkeypatch.setenv("GPUWISE_NO_CACHE", "1")
    for precision in ("fp32", "amp-bf16"):
        peaks = []
        for dtype in ("bfloat16", "float32"):
            spec = _tiny_llama(tmp_path / f"{dtype}-{precision}", dtype)
            est = TracedModel(Workload(model=spec, batch_size=2, seq_len=32, precision=precision)).estimate(None)
            peaks.append((est.memory.weights_bytes, est.memory.peak_allocated_bytes))
        assert peaks[0] == peaks[1], precision


def test_the_precisions_a_gpu_runs_are_those_at_their_own_rate():
    # was: a V100's bf16 refusal said "(it runs fp32, tf32, amp-fp16, fp16)"; it has no tf32 rate (catalog "-"),
    # so tf32 there runs at the fp32 rate (accepted with a warning) and is not a precision it runs
    assert runs_on(V100) == runs_on(T4) == ("fp32", "amp-fp16", "fp16")
    assert runs_on(A100) == NAMES
