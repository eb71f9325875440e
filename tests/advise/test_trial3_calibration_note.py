"""Trial 3: a damaged calibration file, met while advise predicts the workload a run log records, is named as the
cause (in full): the log's workload is not blamed, and its time predictor still runs, without the calibration."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gpuwise.cli.app import main
from gpuwise.runlog import RunLog
from gpuwise.workload import Workload

RECORDED = Workload("torchvision:resnet18", batch_size=8, image_size=64, precision="amp-bf16")


def _run_log(path) -> str:
    rng = np.random.default_rng(0)
    with RunLog(path) as log:
        log.set_meta("workload", RECORDED.to_dict())
        log.set_meta("gpu", "a100-40gb-sxm4")
        for step in range(300):
            log.log_train(step, t_s=100.0 + 0.5 * step, loss=1.0 + 2.0 * np.exp(-step / 40) + rng.normal(0, 0.02))
    return str(path)


def _advise_json(argv, capsys) -> tuple[dict, str]:
    capsys.readouterr()
    try:
        main(["advise", *argv, "--json"])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


@pytest.fixture
def damaged_calibration(tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.mkdir()
    (config / "calibration.toml").write_text("this is [[[ not toml\n")
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(config))
    return config / "calibration.toml"


def test_a_damaged_calibration_is_named_not_the_run_logs_workload(tmp_path, damaged_calibration, capsys):
    log = _run_log(tmp_path / "run.db")
    out, err = _advise_json([log], capsys)
    note = out["workload_note"]
    assert "no prediction for the run log's workload" not in note
    assert str(damaged_calibration) in note and note.endswith("--no-user-calibration ignores it")
    # the recorded workload still scales the step times, with the shipped time model: as --no-user-calibration
    assert out["workload"]["from"] == "run log" and out["user_calibration"] == []
    shipped, _ = _advise_json([log, "--no-user-calibration"], capsys)
    assert {o["gpu"]: o["step_time_s"] for o in out["gpu_options"]} == \
        {o["gpu"]: o["step_time_s"] for o in shipped["gpu_options"]}
    assert "not needed by this command" not in err      # the file was needed: the note says it, no second word


def test_with_model_a_damaged_calibration_still_refuses_in_one_line(tmp_path, damaged_calibration, capsys):
    log = _run_log(tmp_path / "run.db")
    with pytest.raises(SystemExit) as exc:
        main(["advise", log, "--model", "torchvision:resnet18", "--batch-size", "8", "--image-size", "64"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and str(damaged_calibration) in err and len(err.strip().splitlines()) == 1


def test_the_end_a_trainer_state_sets_is_not_said_to_come_from_a_run_log(tmp_path, capsys):
    # trial 3: HF Trainer's max_steps was credited to "the run log", a file the user never wrote
    rng = np.random.default_rng(1)
    history = [{"step": s, "loss": 2.0 + 3 * np.exp(-s / 200) + rng.normal(0, 0.01), "learning_rate": 5e-5}
               for s in range(10, 4010, 10)]
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": history, "max_steps": 8000}, indent=2))
    out, _ = _advise_json([str(state), "--gpu", "rtx-3090", "--step-time-s", "0.5"], capsys)
    texts = " ".join(item["text"] for item in out["advice"])
    assert "max_steps in the log" in texts and "run log" not in texts
