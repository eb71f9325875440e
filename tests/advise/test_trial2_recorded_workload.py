"""Trial 2: `gpuwise advise RUN.db` uses the workload the run log records (as report does) when no --model is
given, says so, and the command line still wins."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpuwise.cli.app import main
from gpuwise.runlog import RunLog
from gpuwise.workload import Workload

RECORDED = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-bf16")


def _run_log(path, workload: dict) -> str:
    rng = np.random.default_rng(0)
    with RunLog(path) as log:
        log.set_meta("workload", workload)
        log.set_meta("gpu", "a100-40gb-sxm4")
        for step in range(300):
            log.log_train(step, t_s=100.0 + 0.5 * step, loss=1.0 + 2.0 * np.exp(-step / 40) + rng.normal(0, 0.02))
    return str(path)


def _advise(argv, capsys) -> str:
    try:
        main(["advise", *argv])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    return capsys.readouterr().out


def _step_times(out: str) -> dict[str, float]:
    return {o["gpu"]: o["step_time_s"] for o in json.loads(out)["gpu_options"]}


@pytest.fixture(scope="module")
def recorded_log(tmp_path_factory):
    return _run_log(tmp_path_factory.mktemp("trial2") / "run1.db", RECORDED.to_dict())


def test_the_recorded_workload_scales_step_times_as_if_given_with_model(recorded_log, capsys):
    text = " ".join(_advise([recorded_log], capsys).split())
    assert "scaled by the time predictor for torchvision:resnet18" in text
    assert "the workload the run log records" in text and "(--model uses the time predictor)" not in text
    recorded = json.loads(_advise([recorded_log, "--json"], capsys))
    assert recorded["workload"]["from"] == "run log" and recorded["workload"]["model"] == RECORDED.model
    given = _advise([recorded_log, "--json", "--model", RECORDED.model, "--batch-size", "8", "--image-size", "64",
                     "--precision", "amp-bf16"], capsys)
    assert _step_times(json.dumps(recorded)) == pytest.approx(_step_times(given))


def test_model_on_the_command_line_wins_over_the_record(recorded_log, capsys):
    out = json.loads(_advise([recorded_log, "--json", "--model", "torchvision:resnet18", "--batch-size", "4",
                              "--image-size", "64"], capsys))
    assert out["workload"]["from"] == "--model" and out["workload"]["batch_size"] == 4


def test_precision_and_num_gpus_given_replace_the_recorded_ones(recorded_log, capsys):
    out = json.loads(_advise([recorded_log, "--json", "--precision", "fp32", "--num-gpus", "2"], capsys))
    assert out["workload"]["from"] == "run log"
    assert (out["workload"]["precision"], out["workload"]["num_gpus"]) == ("fp32", 2)
    assert out["workload"]["batch_size"] == RECORDED.batch_size


def test_a_recorded_local_model_file_is_not_run_on_the_logs_word(tmp_path, capsys):
    log = _run_log(tmp_path / "private.db", {**RECORDED.to_dict(), "model": "my_model.py:build"})
    out = json.loads(_advise([log, "--json"], capsys))
    assert out["workload"] is None and "--model SPEC" in out["workload_note"]
    text = " ".join(_advise([log], capsys).split())
    assert "names a local model file" in text and "scaled by the datasheet ratio" in text


def test_a_recorded_model_gpuwise_cannot_predict_falls_back_to_the_datasheet_with_a_line(tmp_path, capsys):
    log = _run_log(tmp_path / "unknown.db", {**RECORDED.to_dict(), "model": "torchvision:no_such_net"})
    out = json.loads(_advise([log, "--json"], capsys))
    assert out["workload"] is None and "no prediction for the run log's workload" in out["workload_note"]
    assert "scaled by the datasheet ratio" in " ".join(_advise([log], capsys).split())


def test_a_precision_given_over_the_record_is_the_user_s_own_not_a_default():
    # review: the record's precision_default=True stayed, so a --precision bf16 the user gave could be swapped for
    # fp16 on a GPU without bf16 instead of refused there
    from gpuwise.cli.advise import _recorded_workload
    from gpuwise.workload import Workload

    record = Workload("hf:Qwen/Qwen2.5-0.5B", finetune="lora", seq_len=128).with_default_precision().to_dict()
    assert Workload.from_dict(record).precision_default       # the run's own precision was the default rule's
    workload, why = _recorded_workload(record, None, "bf16")
    assert why is None and workload.precision == "bf16" and workload.precision_default is False
