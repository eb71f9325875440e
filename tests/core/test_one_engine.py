"""One job, four commands, one answer: estimate, recommend, report and advise agree on fit, headroom and
the step-time ratio between GPUs, for every catalog GPU (they all ask gpuwise.plan).

The defect this guards against: a 14 GiB job "fit" a T4 in advise and not in report; --headroom meant a
share of the GPU in estimate/recommend and a share of the need in report; four different time models.
"""

from __future__ import annotations


import pytest

from gpuwise.catalog import load_catalog
from gpuwise.plan.fit import usable_bytes
from gpuwise.runlog import RunLog

RENTED = "a100-40gb-sxm4"
RENTED_NVML = "NVIDIA A100-SXM4-40GB"
HEADROOM = "7%"
STEPS = 240

JOBS = {
    "traced": ["torchvision:resnet18", "--batch-size", "8", "--image-size", "64", "--precision", "amp-fp16"],
    "closed-form": ["hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "512", "--batch-size", "2",
                    "--precision", "amp-bf16"],
}


def _run_log(path, peak_bytes: int) -> str:
    """A run on the rented GPU, busy all the time, whose processes peaked at ``peak_bytes``, 1 s a step."""
    t0 = 1.7e9
    with RunLog(path) as log:
        log.write_gpu_samples([
            {"t_s": t0 + i, "gpu_index": 0, "name": RENTED_NVML, "utilization_pct": 100.0,
             "memory_used_bytes": peak_bytes, "memory_total_bytes": 40960 * 2**20, "process_memory_bytes": peak_bytes}
            for i in range(0, STEPS, 5)
        ])
        for step in range(1, STEPS + 1):
            log.log_train(step, t_s=t0 + step, loss=2.0 / step**0.3)
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(JOBS))
def test_estimate_recommend_report_and_advise_agree(kind, tmp_path, cli_json):
    job = JOBS[kind]
    catalog = load_catalog(user_file=False)
    gpus = {g.id: g for g in catalog.gpus}

    est = cli_json(["estimate", *job, "--gpu", "all", "--headroom", HEADROOM, "--json"])
    assert est["method"] == kind
    per_gpu = {r["gpu"]: r for r in est["per_gpu"]}
    assert set(per_gpu) == set(gpus)
    peak = per_gpu[RENTED]["peak_total_bytes"]

    rec = cli_json(["recommend", *job, "--steps", "100", "--max-gpus", "1", "--spot", "--no-remedies",
                 "--headroom", HEADROOM, "--json"])
    log = _run_log(tmp_path / "run.db", peak)
    rep = cli_json(["report", log, "--model", *job, "--headroom", HEADROOM, "--spot", "--json"])
    adv = cli_json(["advise", log, "--model", *job, "--headroom", HEADROOM, "--spot", "--json"])

    usable = {g: usable_bytes(gpus[g], 0.07) for g in gpus}
    # estimate and recommend: the same prediction, the same fit and spare memory, the same step time (an
    # option excluded before estimating, bf16 on a T4, has no peak)
    estimated = [o for o in rec["options"] if o["peak_total_bytes"] is not None]
    assert RENTED in {o["gpu"] for o in estimated}
    for o in estimated:
        e = per_gpu[o["gpu"]]
        assert (o["fits"], o["spare_bytes"]) == (e["fits"], e["spare_bytes"]), o["gpu"]
        assert o["step_time_s"] == pytest.approx(e["step_time_s"], rel=1e-9), o["gpu"]
    # report and advise: the same measured peak, the same fit and spare memory on every GPU they price
    rows = {o["gpu"]: o for o in rep["right_sizing"]["options"]}
    assert set(rows) == set(gpus)
    quotes = {o["gpu"]: o for o in adv["gpu_options"]}
    assert quotes, "advise priced no GPU"
    for g, q in quotes.items():
        assert (q["fits"], q["spare_bytes"]) == (rows[g]["fits"], rows[g]["spare_bytes"]), g
    # all four: one meaning of headroom (a share of each GPU's memory as the driver reports it) ...
    for g in gpus:
        assert rows[g]["spare_bytes"] == usable[g] - peak
        assert per_gpu[g]["spare_bytes"] == usable[g] - per_gpu[g]["peak_total_bytes"]
        if per_gpu[g]["peak_total_bytes"] == peak:     # the same need: the same verdict
            assert rows[g]["fits"] == per_gpu[g]["fits"], g
    # ... and one model of time on another GPU: the runtime's predicted ratio
    t_rented = per_gpu[RENTED]["step_time_s"]
    step_on_rented = quotes[RENTED]["step_time_s"]
    assert t_rented and step_on_rented
    for g in gpus:
        t = per_gpu[g]["step_time_s"]
        ratio = rows[g]["step_time_ratio"]
        if t is None or ratio is None:
            assert ratio is None or t is None
            continue
        assert ratio == pytest.approx(t / t_rented, rel=1e-9), g
        if g in quotes:                                  # advise prices the GPUs with offers
            assert quotes[g]["step_time_s"] / step_on_rented == pytest.approx(ratio, rel=1e-9), g


def test_without_a_workload_report_and_advise_scale_by_the_same_datasheet_ratio(tmp_path, cli_json):
    log = _run_log(tmp_path / "run.db", 14 * 2**30)
    rep = cli_json(["report", log, "--json"])
    adv = cli_json(["advise", log, "--json"])
    rows = {o["gpu"]: o for o in rep["right_sizing"]["options"]}
    quotes = {o["gpu"]: o for o in adv["gpu_options"]}
    assert rep["right_sizing"]["method"].startswith("datasheet ratio")
    on_rented = quotes[RENTED]["step_time_s"]
    for g, q in quotes.items():
        assert q["step_time_s"] / on_rented == pytest.approx(rows[g]["step_time_ratio"], rel=1e-9), g
        assert (q["fits"], q["spare_bytes"]) == (rows[g]["fits"], rows[g]["spare_bytes"]), g
    # the 14 GiB job of the issue: the same verdict on a T4 from both (15360 MiB × 95% = 14.25 GiB)
    assert rows["t4"]["fits"] is True and quotes["t4"]["fits"] is True
