"""`report` says whose the rented GPU's catalog price is ("yours" for a price of your own, as `gpus` does), and
names a price it uses that was checked long ago (the day counted to is given: no test reads the clock)."""

from __future__ import annotations

import datetime
from pathlib import Path

from gpuwise.catalog import GPU, Catalog, Offer, load_catalog
from gpuwise.monitor.sample import GpuSample
from gpuwise.report import build_report
from gpuwise.report.rightsize import right_size
from gpuwise.report.sources import UsageLog
from gpuwise.report.usage import summarize

GIB = 2**30
SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed_a100_smi.csv"


def gpu(id_: str, memory_gib: int) -> GPU:
    return GPU(id=id_, name=id_.upper(), arch="x", compute_capability="8.0", sm_count=1, cuda_cores=1,
               tensor_cores=1, memory_bytes=memory_gib * GIB, memory_bandwidth_gbs=1000, l2_bytes=1,
               peak_tflops={"fp32": 10, "fp16": 100}, tdp_w=300, pcie_gen=4, nvlink_gbs=None, source="test")


BIG, SMALL = gpu("big", 40), gpu("small", 16)


def usage():
    samples = [GpuSample(t_s=t * 60.0, gpu_index=0, name="BIG", utilization_pct=50.0,
                         memory_used_bytes=8 * GIB, memory_total_bytes=40 * GIB) for t in range(61)]
    return summarize(UsageLog("mem.csv", "test", tuple(samples)))


def catalog(big_checked: str, *, own: bool) -> Catalog:
    return Catalog(gpus=(BIG, SMALL), offers=(
        Offer("lab", "big", 1, 10.0, "CNY", False, "mine" if own else "list", big_checked, indicative=not own),
        Offer("lab", "small", 1, 2.0, "CNY", False, "list", "2026-11-20"),
    ))


def test_the_rented_gpus_own_price_is_said_to_be_yours():
    # before: "(catalog: lab (2026-12-01, indicative))" for a price of the user's own file
    sizing = right_size(usage(), catalog("2026-12-01", own=True), BIG)
    assert sizing.price_source == "catalog: lab (2026-12-01, yours)"
    shipped = right_size(usage(), catalog("2026-12-01", own=False), BIG)
    assert shipped.price_source == "catalog: lab (2026-12-01, indicative)"


def test_report_says_yours_for_a_price_from_your_catalog_file(tmp_path):
    (tmp_path / "mine.toml").write_text('[[offer]]\nprovider="autodl"\ngpu="NVIDIA A100-SXM4-40GB"\nprice_per_hour=5\n'
                                        'currency="CNY"\nsource="mine"\nchecked="2026-12-01"\n')
    report = build_report(SEED, load_catalog(tmp_path / "mine.toml", user_file=False))
    assert report.to_dict()["right_sizing"]["price_source"] == "catalog: autodl (2026-12-01, yours)"


def test_a_price_checked_long_ago_is_named_in_one_note():
    from gpuwise.catalog.model import STALE_PRICE_AGE_DAYS

    today = datetime.date(2026, 12, 6)
    old = (today - datetime.timedelta(days=STALE_PRICE_AGE_DAYS + 1)).isoformat()
    fresh = (today - datetime.timedelta(days=STALE_PRICE_AGE_DAYS)).isoformat()
    notes = right_size(usage(), catalog(old, own=True), BIG, today=today).notes
    (note,) = [n for n in notes if "checked more than" in n]
    assert f"lab big ({old})" in note and "small" not in note and "\n" not in note
    assert not [n for n in right_size(usage(), catalog(fresh, own=True), BIG, today=today).notes
                if "checked more than" in n]
