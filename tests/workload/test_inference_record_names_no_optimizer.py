"""A serving trial: ``estimate --mode infer --json`` recorded ``"optimizer": "adamw"`` in its workload, an optimizer
the job never steps. An inference job's record says null; every reader (``Workload.from_dict``: calibrate, report,
the guard, a run log) reads it back as the same job, and a training record still names its optimizer."""

import json

import pytest

from gpuwise.workload import Workload, WorkloadError

LLAMA_8B = "hf:meta-llama/Meta-Llama-3-8B"


def _through_json(w: Workload) -> Workload:
    return Workload.from_dict(json.loads(json.dumps(w.to_dict())))


def test_an_inference_record_names_no_optimizer_and_reads_back_as_the_same_job():
    served = Workload(LLAMA_8B, mode="infer", seq_len=1024, max_new_tokens=256, optimizer_default=True)
    assert served.to_dict()["optimizer"] is None
    assert _through_json(served) == served


def test_an_upper_case_inference_record_reads_back_too():
    record = {**Workload(LLAMA_8B, mode="infer").to_dict(), "mode": "INFER"}
    assert record["optimizer"] is None
    assert Workload.from_dict(record) == Workload(LLAMA_8B, mode="infer")


def test_a_training_record_still_names_its_optimizer():
    trained = Workload(LLAMA_8B, mode="train", optimizer="sgd")
    assert trained.to_dict()["optimizer"] == "sgd"
    assert _through_json(trained) == trained


def test_a_training_record_without_an_optimizer_is_refused():
    record = {**Workload(LLAMA_8B, mode="train").to_dict(), "optimizer": None}
    with pytest.raises(WorkloadError, match="optimizer"):
        Workload.from_dict(record)


def test_estimate_json_of_a_serving_job_records_no_optimizer(cli_json):
    out = cli_json(["estimate", LLAMA_8B, "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256",
                    "--gpu", "h100-sxm", "--json"])
    assert out["workload"]["mode"] == "infer" and out["workload"]["optimizer"] is None
    assert Workload.from_dict(out["workload"]).mode == "infer"


def test_estimate_json_of_a_training_job_records_its_optimizer(cli_json):
    out = cli_json(["estimate", LLAMA_8B, "--seq-len", "512", "--batch-size", "1", "--gpu", "h100-sxm", "--json"])
    assert out["workload"]["optimizer"] == "adamw"
