"""`gpuwise estimate` on several GPUs: the header says the batch is each GPU's and what the effective batch is
(samples per optimizer step), `--json` gives it as `effective_batch_size`; and a count that none of the
`--provider`'s offers rents is said, with the counts it rents, as a count that is no whole machines is."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.workload import Workload

MODEL = '''
import torch
from torch import nn


def mlp(batch_size=4):
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)), (torch.randn(batch_size, 32),)
'''


@pytest.fixture
def model(tmp_path) -> str:
    (tmp_path / "tiny.py").write_text(MODEL)
    return f"{tmp_path / 'tiny.py'}:mlp"


@pytest.fixture
def estimate(capsys):
    """Runs `gpuwise estimate` in this process: (exit code, stdout with its line breaks undone, stderr)."""
    from gpuwise.cli.app import main

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(["estimate", *args])
        out, err = capsys.readouterr()
        return exit_info.value.code or 0, " ".join(out.split()), err

    return run


def test_the_header_says_the_batch_is_per_gpu_and_the_effective_batch(model, estimate):
    code, out, err = estimate(model, "--gpu", "v100-32gb-sxm2", "--num-gpus", "8", "-b", "32", "--grad-accum", "2")
    assert code == 0, err
    assert f"train, batch 32 per GPU × 2 accumulation steps × 8 GPUs = effective batch {32 * 2 * 8}," in out


def test_a_defaulted_batch_is_said_beside_the_batch_not_the_effective_one(model, estimate):
    default = Workload(model="torchvision:resnet18").batch_size
    code, out, err = estimate(model, "--gpu", "v100-32gb-sxm2", "--num-gpus", "4")
    assert code == 0, err
    assert f"batch {default} per GPU (the default; --batch-size to choose) × 4 GPUs = effective batch {default * 4}," in out


def test_one_gpu_without_accumulation_says_the_batch_alone(model, estimate):
    code, out, err = estimate(model, "--gpu", "v100-32gb-sxm2", "-b", "16")
    assert code == 0, err
    assert "train, batch 16," in out and "effective" not in out and "per GPU" not in out


def test_json_gives_the_effective_batch_size(model, cli_json):
    out = cli_json(["estimate", model, "--gpu", "v100-32gb-sxm2", "--num-gpus", "8", "-b", "32", "--grad-accum", "3",
                    "--json"])
    w = out["workload"]
    assert w["batch_size"] == 32 and out["effective_batch_size"] == w["batch_size"] * w["grad_accum_steps"] * w["num_gpus"]
    assert out["effective_batch_size"] == 32 * 3 * 8


def test_serving_has_no_effective_batch(model, cli_json):
    out = cli_json(["estimate", model, "--mode", "infer", "-b", "8", "--json"])
    assert out["effective_batch_size"] is None


def _counts_rented(gpu: str, provider: str) -> set[int]:
    return {o.count for o in load_catalog().offers_for(gpu, provider=provider)}


def test_a_count_the_provider_does_not_rent_is_said_with_the_counts_it_rents(model, cli_json):
    (instance,) = _counts_rented("a100-40gb-sxm4", "aws")    # the case: AWS rents it only as whole p4d instances
    out = cli_json(["estimate", model, "--gpu", "a100-40gb-sxm4", "--num-gpus", "3", "--provider", "aws", "-b", "64",
                    "--json"])
    said = [w for w in out["time"]["warnings"] if "has no offer" in w]
    assert said == [f"aws has no offer of 3 a100-40gb-sxm4: it rents {instance} at a time"]


def test_a_count_the_provider_rents_and_one_of_no_whole_machines_get_no_offer_warning(model, cli_json):
    rented = max(_counts_rented("a100-40gb-sxm4", "aws"))
    for count in (rented, rented + rented // 2):   # an instance; one and a half (launch's warning alone)
        out = cli_json(["estimate", model, "--gpu", "a100-40gb-sxm4", "--num-gpus", str(count), "--provider", "aws",
                        "--json"])
        assert not [w for w in out["time"]["warnings"] if "has no offer" in w], count
    assert any(w.startswith("gpuwise does not launch this") for w in out["time"]["warnings"])


def test_text_output_says_the_unrented_count_as_a_warning(model, estimate):
    code, out, err = estimate(model, "--gpu", "a100-40gb-sxm4", "--num-gpus", "3", "--provider", "aws", "-b", "64")
    assert code == 0, err
    assert "warning: aws has no offer of 3 a100-40gb-sxm4: it rents" in out
