"""A "Finish on X" row counts the switch in its time as in its cost, as the GPU plan's phase on X does: before, the
row read "rtx-a5000 (autodl): 7.4 h, ¥9.24" and the plan table, for the same steps, "7.7 h, ¥9.24"."""

from dataclasses import replace

import pytest

from gpuwise.advise import AdviseSettings, Curve, PricingRequest, TrainingLog, advise
from gpuwise.catalog.model import Catalog

from .curves import plateau_after
from .test_spot_pricing import BIG, HALF, ON_DEMAND_BIG, SPOT_HALF, SWITCH

CATALOGS = {True: Catalog(gpus=(BIG, HALF), offers=(ON_DEMAND_BIG, SPOT_HALF)),
            False: Catalog(gpus=(BIG, HALF), offers=(ON_DEMAND_BIG, replace(SPOT_HALF, spot=False)))}


def _flat_run_report(spot: bool):
    s, y = plateau_after(300, n=1000)
    log = TrainingLog(Curve(s, y, t_s=1e9 + 1.0 * s), gpu_name="big", peak_memory_bytes=20 * 10**9)
    return advise(log, AdviseSettings(total_steps=11_000), CATALOGS[spot],
                  PricingRequest(switch=SWITCH, precision="amp-bf16", spot=spot))


@pytest.mark.parametrize("spot", [True, False])
def test_a_switch_row_and_the_plan_phase_for_the_same_steps_agree_on_time_and_cost(spot):
    report = _flat_run_report(spot)
    (switch,) = [x for x in report.advice if x.kind == "switch_gpu"]
    rows = {r["gpu"]: r for r in switch.numbers["options"]}
    moved = report.plan.phases[-1]
    assert moved.from_step == report.analysis.last_step      # the plan moves now: the same steps as the row
    row = rows[moved.gpu_id]
    assert row["hours"] == pytest.approx(moved.hours, rel=1e-9)
    assert row["cost"] == pytest.approx(moved.cost, rel=1e-9)
    assert row["hours"] * 3600 > SWITCH.overhead_s
