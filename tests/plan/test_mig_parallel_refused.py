"""A job over several MIG slices is refused: a process sees one slice, slices have no peer-to-peer, and NCCL runs
no collective across them, so neither tensor-parallel serving nor multi-GPU training spans slices (the rule by
which recommend rents a slice one at a time, never x N)."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog, resolve_gpu

from tests.cli.test_mig_slice_offer import OFFER    # a slice's price in a catalog file

SLICE = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"


def _one_line_refusal(code: int, err: str) -> bool:
    return code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("gpuwise: error: ")


@pytest.mark.parametrize("job", [
    # tensor-parallel serving (before: a tensor-parallel plan with its communication time)
    ["hf:meta-llama/Meta-Llama-3-8B", "--mode", "infer", "--engine", "vllm"],
    ["hf:meta-llama/Meta-Llama-3-8B", "--mode", "infer", "--max-new-tokens", "64"],      # HF's layer split
    ["hf:Qwen/Qwen2.5-0.5B", "--seq-len", "256", "--sharding", "zero3"],                    # sharded training
    ["torchvision:resnet18", "--batch-size", "8"],                                          # data-parallel training
])
def test_several_slices_are_refused_in_one_line(cli_run, job):
    code, out, err = cli_run("estimate", *job, "--gpu", SLICE, "--num-gpus", "2")
    assert _one_line_refusal(code, err), err
    assert "MIG slice" in err and "--num-gpus 2" in err and not out


def test_one_slice_is_still_estimated(cli_json):
    answer = cli_json(["estimate", "hf:meta-llama/Meta-Llama-3-8B", "--mode", "infer", "--engine", "vllm",
                       "--gpu", SLICE, "--json"])
    assert answer["gpu"].endswith("-mig-3g.40gb") and answer["time"]["communication_s"] in (0, 0.0, None)


def test_the_rule_is_about_slices_and_counts():
    from gpuwise.catalog.resolve import mig_count_refusal

    cat = load_catalog(user_file=False)
    piece, whole = resolve_gpu(cat, SLICE), resolve_gpu(cat, "a100-80gb-sxm4")
    assert mig_count_refusal(piece, 1) is None and mig_count_refusal(whole, 8) is None
    assert "MIG slice" in mig_count_refusal(piece, 2)


def test_gpu_all_leaves_slices_out_at_several_gpus(tmp_path, cli_run):
    (tmp_path / "mig.toml").write_text(OFFER.format(gpu=SLICE))
    code, out, err = cli_run("estimate", "hf:Qwen/Qwen2.5-0.5B", "--mode", "infer", "--engine", "vllm",
                             "--num-gpus", "2", "--gpu", "all", "--catalog", str(tmp_path / "mig.toml"))
    assert code == 0, err
    assert "mig-3g.40gb" not in out and "MIG slice left out (a100-80gb-sxm4-mig-3g.40gb)" in err
    # at one GPU each the slice is a row of its own
    code, out, err = cli_run("estimate", "hf:Qwen/Qwen2.5-0.5B", "--mode", "infer", "--engine", "vllm",
                             "--gpu", "all", "--catalog", str(tmp_path / "mig.toml"))
    assert code == 0 and "mig-3g.40gb" in out.replace("\n", "")


def test_the_library_refuses_it_too_and_no_change_offers_several_slices():
    # the rule lived in the estimate command: the library answered N slices, and a job that does not fit a slice
    # was offered "--num-gpus N --sharding zero3" over slices
    from gpuwise.plan.profile import cannot_run
    from gpuwise.plan.remedies import changes_that_fit
    from gpuwise.workload import Workload

    piece = resolve_gpu(load_catalog(user_file=False), SLICE)
    job = Workload(model="hf:Qwen/Qwen2.5-7B", finetune="full", seq_len=512)
    assert "MIG slice" in cannot_run(job.with_(num_gpus=2), piece) and cannot_run(job, piece) is None
    changes = changes_that_fit(job, piece, headroom_fraction=0.05, closed_form=True)
    assert changes and not any("--num-gpus" in ch["change"] for ch in changes)
