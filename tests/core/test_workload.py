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
