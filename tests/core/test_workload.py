import pytest

from gpuwise.workload import Workload, WorkloadError


def test_effective_batch_is_micro_batch_times_accumulation_times_gpus():
    w = Workload("torchvision:resnet50", batch_size=16, grad_accum_steps=4, num_gpus=2)
    assert w.effective_batch_size == 128


@pytest.mark.parametrize("field, value", [("precision", "fp8"), ("optimizer", "adamm"), ("mode", "serve")])
def test_unknown_choice_names_value_and_suggests(field, value):
    with pytest.raises(WorkloadError) as exc:
        Workload("torchvision:resnet50", **{field: value})
    msg = str(exc.value)
    assert repr(value) in msg and "valid:" in msg
    if value == "adamm":
        assert "did you mean: adam" in msg


@pytest.mark.parametrize("bad", [0, -1, 10**9])
def test_absurd_batch_sizes_are_refused(bad):
    with pytest.raises(WorkloadError, match="--batch-size"):
        Workload("torchvision:resnet50", batch_size=bad)


def test_qlora_implies_nf4_base_weights():
    assert Workload("hf:x", finetune="qlora").quant == "nf4"


@pytest.mark.parametrize("quant, mode", [("int8", "train"), ("fp8", "train"), ("int8", "infer"), ("fp8", "infer")])
def test_qlora_with_base_weights_other_than_nf4_is_refused(quant, mode):
    # QLoRA is LoRA on nf4 base weights (the QLoRA paper; bitsandbytes' 4-bit layers): before, --finetune qlora
    # --quant int8 was estimated on int8 weights under a header that said qlora
    with pytest.raises(WorkloadError, match=f"--finetune qlora .* nf4 base weights, not {quant}"):
        Workload("hf:x", finetune="qlora", quant=quant, mode=mode)
    assert Workload("hf:x", finetune="qlora", quant="nf4").quant == "nf4"
    assert Workload("hf:x", finetune="lora", quant="int8").quant == "int8"     # LoRA on int8 weights stays


def test_qlora_with_int8_exits_2_in_one_line_naming_lora_int8():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", "hf:meta-llama/Llama-2-7b-hf",
                        "--finetune", "qlora", "--quant", "int8", "--seq-len", "512", "-b", "1", "--gpu", "rtx-4090"],
                       capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and r.stdout == "" and len(lines) == 1, r.stderr
    assert lines[0].startswith("gpuwise: error: --finetune qlora") and "--finetune lora --quant int8" in lines[0]
