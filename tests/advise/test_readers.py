"""Each reader on real files: CSV, JSONL, TensorBoard (written by torch's SummaryWriter), the run log."""

import json

import numpy as np
import pytest

from gpuwise.advise import AdviseError, read_log
from gpuwise.runlog import RunLog


def test_csv_with_framework_column_names_is_read(tmp_path):
    path = tmp_path / "log.csv"
    rows = ["Step,train/loss,Learning Rate,wall_time,eval_loss"]
    rows += [f"{s},{2.0 - 0.001 * s},{1e-3},{1000.0 + 0.5 * s}," for s in range(0, 100, 10)]
    rows.insert(3, "15,,0.001,1007.5,1.9")  # an eval row without a training loss is skipped
    path.write_text("\n".join(rows) + "\n")
    log = read_log(path)
    assert list(log.curve.steps) == list(range(0, 100, 10))
    assert log.curve.loss[-1] == pytest.approx(2.0 - 0.09)
    assert log.curve.lr[0] == pytest.approx(1e-3)
    assert log.curve.step_time_s() == pytest.approx(0.5)


def test_csv_without_a_step_column_uses_the_row_number_and_keeps_nan(tmp_path):
    path = tmp_path / "losses.csv"
    path.write_text("loss\n3.0\n2.5\nnan\n")
    c = read_log(path).curve
    assert list(c.steps) == [0, 1, 2]
    assert np.isnan(c.loss[2])


def test_jsonl_with_iso_times_and_repeated_steps_keeps_the_latest(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [{"step": 1, "loss": 2.0, "time": "2026-12-02T10:00:00Z", "batch_size": 32},
             {"step": 2, "loss": 1.9, "time": "2026-12-02T10:00:01Z"},
             {"step": 2, "loss": 1.8, "time": "2026-12-02T10:00:02Z"},  # a resumed run redoing step 2
             {"eval_accuracy": 0.5},
             {"step": 3, "loss": 1.7, "time": "2026-12-02T10:00:04Z"}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    c = read_log(path).curve
    assert list(c.steps) == [1, 2, 3]
    assert list(c.loss) == [2.0, 1.8, 1.7]
    assert c.step_time_s() == pytest.approx(2.0)
    assert c.last_batch_size() == 32


def test_tensorboard_event_dir_written_by_summary_writer(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "runs" / "exp1"
    with SummaryWriter(log_dir=str(run)) as writer:
        for step in range(50):
            writer.add_scalar("train/loss", 3.0 / (1 + step), step)
            writer.add_scalar("val/loss", 9.0, step)
            writer.add_scalar("train/lr", 0.1, step)
    for path in (run, tmp_path / "runs"):  # the run directory, or its parent holding one run
        c = read_log(path).curve
        assert len(c) == 50
        assert c.loss[10] == pytest.approx(3.0 / 11)
        assert c.lr[0] == pytest.approx(0.1)
        assert c.t_s is not None


def test_tensorboard_parent_with_two_runs_asks_for_one(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    for name in ("a", "b"):
        with SummaryWriter(log_dir=str(tmp_path / name)) as writer:
            writer.add_scalar("loss", 1.0, 0)
    with pytest.raises(AdviseError, match="2 TensorBoard runs"):
        read_log(tmp_path)


def test_run_log_with_noise_metrics_and_gpu_samples(tmp_path):
    path = tmp_path / "run.db"
    with RunLog(path) as log:
        log.set_meta("workload", {"precision": "amp-bf16"})
        log.write_gpu_samples([{"t_s": 1.0, "gpu_index": 0, "name": "NVIDIA A100-SXM4-80GB",
                                "process_memory_bytes": 30 * 10**9}])
        for step in range(20):
            log.log_train(step, t_s=100.0 + step, loss=2.0 - 0.01 * step, lr=1e-3, batch_size=64,
                          grad_sq_norm_small=3.0, grad_sq_norm_big=1.5, noise_b_small=16, noise_b_big=64)
    tl = read_log(path)
    assert len(tl.curve) == 20 and tl.curve.step_time_s() == pytest.approx(1.0)
    assert tl.gpu_name == "NVIDIA A100-SXM4-80GB"
    assert tl.peak_memory_bytes == 30 * 10**9
    assert tl.precision == "amp-bf16"
    assert tl.noise is not None and len(tl.noise) == 20 and tl.noise.b_big[0] == 64


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("bad.csv", "step,loss\n1,2.0\n2,abc\n3,1.0\n", ":3:"),
        ("bad.csv", "step,loss\n1,2.0\n2,1.9,extra,more\n", ":3:"),
        ("bad.jsonl", '{"step": 1, "loss": 2.0}\n{"step": 2, "loss": \n', ":2:"),
        ("bad.jsonl", '{"step": 1, "loss": 2.0}\n[1, 2]\n', ":2:"),
        ("bad.jsonl", '{"step": 1, "loss": 2.0}\n{"step": "x", "loss": 1.0}\n', ":2:"),
    ],
)
def test_malformed_logs_name_the_file_and_line(tmp_path, name, text, where):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(AdviseError) as err:
        read_log(path)
    assert f"{path}{where}" in str(err.value)


def test_a_log_without_a_loss_names_the_columns(tmp_path):
    path = tmp_path / "acc.csv"
    path.write_text("step,accuracy\n1,0.5\n")
    with pytest.raises(AdviseError, match="no loss column.*accuracy"):
        read_log(path)


def test_a_missing_file_is_an_advise_error(tmp_path):
    with pytest.raises(AdviseError, match="no such log"):
        read_log(tmp_path / "nope.csv")
