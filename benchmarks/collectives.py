"""NCCL all-reduce times: gpuwise's ``runtime.comm.collective_s`` against vidur's measurements.

    python -m benchmarks.collectives              # writes benchmarks/results/collectives.md (+ .json)
    python -m benchmarks.collectives --fit-only   # the fit on the training side only: scores nothing held out

Protocol: benchmarks/README.md, eighth session (written before the fit). Data: vidur's network profiles
(``kernels-modern/vidur_network.csv.gz``, microsoft/vidur ``data/profiling/network/``): each time is the
median NCCL kernel duration (kineto, rank 0) of eager ``torch.distributed.all_reduce`` calls on an fp16
buffer; the size column holds **bytes** (vidur 0.0.26 ``profiling/collectives/collectives_wrapper.py``
writes ``"size": elements * 2  # bytes``), whatever the column's name says.

Fitted on the A100 topologies (DGX A100, 4x A100 PCIe with pairwise bridges), scored once on the H100 ones:
per link kind a latency per hop and a bus efficiency (share of the catalog's nominal per-direction rate),
and one latency per collective for every kind (NCCL's launch and the ranks meeting). Nothing is keyed by a
GPU name: each row's links come from ``catalog.topology.topology_for`` for the mapped GPU and link kind.
Beside gpuwise, on the same rows: the prior (the constants committed before this fit) and the datasheet
bus bandwidth with no latency. Multi-node rows (their network is not stated) and send/recv rows (gpuwise
has no point-to-point model) are counted and left out.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
import pandas as pd

from benchmarks.harness import (CELL_HEADER, DATA, Case, comparison_row, record_scoring, scored_words,
                                summarize_cases, verdict, write_results)
from benchmarks.kernel_fit import robust_least_squares
from gpuwise.catalog import load_catalog, resolve_gpu
from gpuwise.catalog.topology import Topology, collective_latency_s, link_efficiencies, topology_data, topology_for
from gpuwise.runtime.comm import collective_s

DATA_FILE = DATA / "kernels-modern" / "vidur_network.csv.gz"
HELD_OUT_SET = "collectives: vidur H100 topologies"
TRAIN_SET = "collectives: vidur A100 topologies"
# vidur topology -> (catalog GPU, intra-node link kind, side). The pairwise nodes are bridged pairs: 2 GPUs run
# over the bridge, 4 GPUs a ring that crosses PCIe (the catalog's rule for nvlink-bridge). H100 PCIe or NVL is
# not stated: both have a 600 GB/s bridge and PCIe Gen5 in the catalog, so the links are the same.
TOPOLOGIES = {
    "a100_dgx": ("a100-80gb-sxm4", "nvswitch", "train"),
    "a100_pairwise_nvlink": ("a100-80gb-pcie", "nvlink-bridge", "train"),
    "h100_dgx": ("h100-sxm", "nvswitch", "test"),
    "h100_pairwise_nvlink": ("h100-pcie", "nvlink-bridge", "test"),
}
FITTED_KINDS = ("nvswitch", "nvlink-bridge", "pcie-p2p")
# Bus efficiencies the fit replaces in topology.toml; the others are multi_gpu_accuracy's data-parallel fit.
SHIPPED_EFFICIENCIES = ("nvlink-bridge",)
HOP_BOUNDS_S = (0.5e-6, 100e-6)
BASE_BOUNDS_S = (0.0, 100e-6)
EFF_BOUNDS = (0.2, 1.0)
SMALL_BYTES = 256 * 2**10           # at or below: latency-bound
LARGE_BYTES = 16 * 2**20            # at or above: bandwidth-bound
PRIOR = "prior"
BANDWIDTH_ONLY = "bandwidth only"
LINK_FIT = "gpuwise link fit"


@dataclass(frozen=True)
class Row:
    topology: str
    gpu_id: str
    intra: str
    count: int
    size_bytes: float
    measured_s: float
    side: str                       # "train" (A100) or "test" (H100)

    @property
    def band(self) -> str:
        return size_band(self.size_bytes)

    @property
    def id(self) -> str:
        return f"{self.topology} x{self.count} {int(self.size_bytes)} B"


@dataclass(frozen=True)
class LinkConstants:
    """What the fit sets: one latency per collective, and per link kind a hop latency and a bus efficiency."""

    collective_latency_s: float
    hop_latency_s: dict[str, float] = field(default_factory=dict)
    bus_efficiency: dict[str, float] = field(default_factory=dict)


# The constants committed before this fit (topology.toml and comm.py at 7be9ec1): the prior baseline.
PRIOR_CONSTANTS = LinkConstants(0.0, {"nvswitch": 10e-6, "nvlink-bridge": 10e-6, "pcie-p2p": 15e-6},
                                {"nvswitch": 0.50, "nvlink-bridge": 0.80, "pcie-p2p": 0.40})
# The datasheet bus bandwidth: the nominal rate, no latency anywhere.
BANDWIDTH_CONSTANTS = LinkConstants(0.0, {k: 0.0 for k in FITTED_KINDS}, {k: 1.0 for k in FITTED_KINDS})


def size_band(size_bytes: float) -> str:
    if size_bytes <= SMALL_BYTES:
        return "small"
    return "large" if size_bytes >= LARGE_BYTES else "middle"


def shipped_constants() -> LinkConstants:
    """What ``topology.toml`` holds now (the product's constants)."""
    data = topology_data()
    eff = link_efficiencies(data)
    return LinkConstants(collective_latency_s(data), {k: float(data["link"][k]["latency_s"]) for k in FITTED_KINDS},
                         {k: eff[k] for k in FITTED_KINDS})


def load_rows() -> tuple[list[Row], dict[str, int]]:
    """Single-node all-reduce rows of the mapped topologies, and the count of every row left out, by reason."""
    frame = pd.read_csv(DATA_FILE)
    left: dict[str, int] = defaultdict(int)
    rows = []
    for r in frame.itertuples(index=False):
        if r.collective != "all_reduce":
            left[f"{r.collective} (no point-to-point model in gpuwise)"] += 1
        elif r.num_workers > r.devices_per_node:
            left["multi-node all_reduce (the network between nodes is not stated)"] += 1
        elif r.topology not in TOPOLOGIES:
            left[f"{r.topology} (not mapped)"] += 1
        else:
            gpu_id, intra, side = TOPOLOGIES[r.topology]
            # the column is named size_fp16_elements in shared/, but vidur writes bytes there (module docstring)
            rows.append(Row(r.topology, gpu_id, intra, int(r.num_workers), float(r.size_fp16_elements),
                            float(r.time_ms_median) * 1e-3, side))
    return rows, dict(left)


@lru_cache(maxsize=None)
def _gpu(gpu_id: str):
    return resolve_gpu(load_catalog(user_file=False), gpu_id)


def topology(gpu_id: str, intra: str, constants: LinkConstants) -> Topology:
    """The catalog's topology of ``gpu_id`` linked by ``intra``, with ``constants`` in place of the shipped ones."""
    topo = topology_for(_gpu(gpu_id), intra=intra, efficiency=constants.bus_efficiency)

    def with_latency(link):
        return replace(link, latency_s=constants.hop_latency_s.get(link.kind, link.latency_s))

    return replace(topo, intra_link=with_latency(topo.intra_link), pair_link=with_latency(topo.pair_link),
                   collective_latency_s=constants.collective_latency_s)


def predict(rows: list[Row], constants: LinkConstants) -> np.ndarray:
    """gpuwise's all-reduce time of every row (s) under ``constants``: the product's ``collective_s``."""
    topos: dict[tuple[str, str], Topology] = {}
    out = np.empty(len(rows))
    for i, r in enumerate(rows):
        key = (r.gpu_id, r.intra)
        if key not in topos:
            topos[key] = topology(r.gpu_id, r.intra, constants)
        out[i] = collective_s("all_reduce", r.size_bytes, r.count, topos[key])
    return out


# -- the fit ------------------------------------------------------------------------------------------------
def _unpack(x: np.ndarray) -> LinkConstants:
    """x: [base (us), hop latency per kind (us)..., efficiency per kind...] (microseconds keep the steps alike)."""
    k = len(FITTED_KINDS)
    return LinkConstants(float(x[0]) * 1e-6, {kind: float(v) * 1e-6 for kind, v in zip(FITTED_KINDS, x[1:1 + k])},
                         {kind: float(v) for kind, v in zip(FITTED_KINDS, x[1 + k:1 + 2 * k])})


def fit(train: list[Row]) -> tuple[LinkConstants, list[str]]:
    """Every constant on the training rows at once (soft-L1 on log time, rows weighted alike), started at the
    prior; also the names of those that ended at a bound."""
    measured = np.log([r.measured_s for r in train])
    k = len(FITTED_KINDS)
    x0 = [0.0, *(PRIOR_CONSTANTS.hop_latency_s[kind] * 1e6 for kind in FITTED_KINDS),
          *(PRIOR_CONSTANTS.bus_efficiency[kind] for kind in FITTED_KINDS)]
    lower = [BASE_BOUNDS_S[0] * 1e6, *[HOP_BOUNDS_S[0] * 1e6] * k, *[EFF_BOUNDS[0]] * k]
    upper = [BASE_BOUNDS_S[1] * 1e6, *[HOP_BOUNDS_S[1] * 1e6] * k, *[EFF_BOUNDS[1]] * k]
    x0 = np.clip(x0, np.add(lower, 1e-6), np.subtract(upper, 1e-6))

    def residuals(x):
        return np.log(predict(train, _unpack(x))) - measured

    res = robust_least_squares(residuals, x0, bounds=(lower, upper))
    names = ["collective latency", *(f"{kind} hop latency" for kind in FITTED_KINDS),
             *(f"{kind} bus efficiency" for kind in FITTED_KINDS)]
    at_bound = [n for n, v, lo, hi in zip(names, res.x, lower, upper)
                if math.isclose(v, lo, rel_tol=1e-3, abs_tol=1e-3) or math.isclose(v, hi, rel_tol=1e-3)]
    return _unpack(res.x), at_bound


# -- scoring ------------------------------------------------------------------------------------------------
def cases(rows: list[Row], set_name: str, split: str, fitted: LinkConstants, shipped: LinkConstants) -> list[Case]:
    mine = predict(rows, shipped)
    others = {PRIOR: predict(rows, PRIOR_CONSTANTS), BANDWIDTH_ONLY: predict(rows, BANDWIDTH_CONSTANTS),
              LINK_FIT: predict(rows, fitted)}
    return [Case(r.id, set_name, split, float(mine[i]), r.measured_s, "s",
                 {name: float(p[i]) for name, p in others.items()}) for i, r in enumerate(rows)]


def _table(title: str, groups: dict[str, list[Case]]) -> list[str]:
    names = (LINK_FIT, PRIOR, BANDWIDTH_ONLY)
    lines = [f"**{title}** ({CELL_HEADER}):", "",
             "| rows | n | gpuwise (shipped) | " + " | ".join(names) + " |", "|---|---|---|---|---|---|"]
    lines += [comparison_row(label, cs, names) for label, cs in groups.items() if cs]
    return lines + [""]


def _groups(rows: list[Row], cs: list[Case]) -> dict[str, dict[str, list[Case]]]:
    by_band: dict[str, list[Case]] = {"all": list(cs)}
    by_config: dict[str, list[Case]] = defaultdict(list)
    for band in ("small", "middle", "large"):
        by_band[f"{band} ({_band_words(band)})"] = [c for r, c in zip(rows, cs) if r.band == band]
    for r, c in zip(rows, cs):
        by_config[f"{r.topology}, {r.count} GPUs ({link_of(r.gpu_id, r.intra, r.count)})"].append(c)
    return {"band": by_band, "config": dict(sorted(by_config.items()))}


def _band_words(band: str) -> str:
    return {"small": "<= 256 KiB, latency-bound", "middle": "256 KiB - 16 MiB",
            "large": ">= 16 MiB, bandwidth-bound"}[band]


@lru_cache(maxsize=None)
def link_of(gpu_id: str, intra: str, count: int) -> str:
    """The link kind a ring of ``count`` such GPUs runs over (bridged cards: PCIe beyond the pair)."""
    return topology(gpu_id, intra, PRIOR_CONSTANTS).ring_link(count).kind


def _constants_table(fitted: LinkConstants, shipped: LinkConstants, at_bound: list[str]) -> list[str]:
    lines = ["| constant | prior | fitted (A100 side) | shipped | at a bound? |", "|---|---|---|---|---|",
             f"| latency per collective | 0 us | {fitted.collective_latency_s * 1e6:.1f} us | "
             f"{shipped.collective_latency_s * 1e6:.1f} us | {'yes' if 'collective latency' in at_bound else 'no'} |"]
    for kind in FITTED_KINDS:
        lines.append(f"| {kind} latency per hop | {PRIOR_CONSTANTS.hop_latency_s[kind] * 1e6:.1f} us | "
                     f"{fitted.hop_latency_s[kind] * 1e6:.2f} us | {shipped.hop_latency_s[kind] * 1e6:.2f} us | "
                     f"{'yes' if f'{kind} hop latency' in at_bound else 'no'} |")
    for kind in FITTED_KINDS:
        lines.append(f"| {kind} bus efficiency | {PRIOR_CONSTANTS.bus_efficiency[kind]:.2f} | "
                     f"{fitted.bus_efficiency[kind]:.3f} | {shipped.bus_efficiency[kind]:.3f} | "
                     f"{'yes' if f'{kind} bus efficiency' in at_bound else 'no'} |")
    return lines


def _reproduces(fitted: LinkConstants, shipped: LinkConstants) -> bool:
    """Whether topology.toml holds the fit's latencies and the efficiencies it ships (to 3 significant figures)."""
    def same(a, b):
        return math.isclose(a, b, rel_tol=5e-3, abs_tol=1e-9)
    return (same(fitted.collective_latency_s, shipped.collective_latency_s)
            and all(same(fitted.hop_latency_s[k], shipped.hop_latency_s[k]) for k in FITTED_KINDS)
            and all(same(fitted.bus_efficiency[k], shipped.bus_efficiency[k]) for k in SHIPPED_EFFICIENCIES))


def _busbw_lines(fitted: LinkConstants) -> list[str]:
    """The fitted efficiency as GB/s of each training and held-out GPU, beside the shipped data-parallel one."""
    lines = []
    for name, (gpu_id, intra, _side) in TOPOLOGIES.items():
        for count in (2, 4):
            link = topology(gpu_id, intra, fitted).ring_link(count)
            ship = topology(gpu_id, intra, shipped_constants()).ring_link(count)
            lines.append(f"- {name}, {count} GPUs: {link.kind} at {link.bus_gbs:.0f} GB/s fitted "
                         f"(shipped {ship.bus_gbs:.0f} GB/s)")
            if intra == "nvswitch":
                break
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit-only", action="store_true", help="fit on the training side; score nothing held out")
    args = parser.parse_args(argv)
    rows, left = load_rows()
    train = [r for r in rows if r.side == "train"]
    test = [r for r in rows if r.side == "test"]
    fitted, at_bound = fit(train)
    shipped = shipped_constants()
    train_cases = cases(train, TRAIN_SET, "train", fitted, shipped)
    lines_fit = _constants_table(fitted, shipped, at_bound)
    if args.fit_only:
        print("\n".join(lines_fit))
        print(f"topology.toml reproduces the fit: {_reproduces(fitted, shipped)}")
        for label, cs in _groups(train, train_cases)["band"].items():
            print(comparison_row(label, cs, (LINK_FIT, PRIOR, BANDWIDTH_ONLY)))
        return
    test_cases = cases(test, HELD_OUT_SET, "test", fitted, shipped)
    count = record_scoring(HELD_OUT_SET)
    test_groups, train_groups = _groups(test, test_cases), _groups(train, train_cases)
    lines = ["# NCCL all-reduce: gpuwise's collective_s against vidur's measurements", "",
             f"Source: `shared/data/public-benchmarks/kernels-modern/vidur_network.csv.gz` (microsoft/vidur), eager "
             "NCCL all-reduce kernel durations, sizes read as bytes (the profiler writes bytes; the column's name "
             "says fp16 elements). Protocol: benchmarks/README.md, eighth session. Script: `benchmarks/collectives.py`.",
             "", f"Rows: {len(train)} training (A100 topologies), {len(test)} held out (H100 topologies). Left out: "
             + "; ".join(f"{n} {why}" for why, n in sorted(left.items())) + ".", "",
             "Topologies: a100_dgx -> a100-80gb-sxm4 on nvswitch; a100_pairwise_nvlink -> a100-80gb-pcie with "
             "bridged pairs (2 GPUs over the bridge, 4 over a PCIe P2P ring); h100_dgx -> h100-sxm on nvswitch; "
             "h100_pairwise_nvlink -> h100-pcie with bridged pairs (H100 PCIe or NVL: the same links in the catalog).",
             "", "## Constants", "", *lines_fit, "",
             f"topology.toml holds the fitted latencies and the {', '.join(SHIPPED_EFFICIENCIES)} efficiency: "
             f"**{'yes' if _reproduces(fitted, shipped) else 'no'}**. Constants at a bound: "
             f"{', '.join(at_bound) or 'none'}. The nvswitch and pcie-p2p bus efficiencies shipped are "
             "multi_gpu_accuracy's data-parallel fit (an effective rate for DDP steps); the link fit's are beside "
             "them. As GB/s:", "", *_busbw_lines(fitted), "",
             "## Held-out: H100 topologies", "",
             f"Scored with the constants above, fitted on the A100 side only; {scored_words(HELD_OUT_SET)}.", "",
             *_table("By size band", test_groups["band"]), *_table("By topology and GPU count", test_groups["config"]),
             verdict(test_cases, PRIOR), "", verdict(test_cases, BANDWIDTH_ONLY), "",
             "The link fit (every constant fitted, efficiencies included) on the same rows: "
             + verdict([replace(c, predicted=c.baselines[LINK_FIT]) for c in test_cases], PRIOR, LINK_FIT), "",
             "## Training side: A100 topologies (in sample)", "",
             *_table("By size band", train_groups["band"]), *_table("By topology and GPU count", train_groups["config"])]
    write_results("collectives", lines, {
        "fitted": {"collective_latency_s": fitted.collective_latency_s, "hop_latency_s": fitted.hop_latency_s,
                   "bus_efficiency": fitted.bus_efficiency, "at_bound": at_bound},
        "shipped": {"collective_latency_s": shipped.collective_latency_s, "hop_latency_s": shipped.hop_latency_s,
                    "bus_efficiency": shipped.bus_efficiency, "reproduces_fit": _reproduces(fitted, shipped)},
        "prior": {"hop_latency_s": PRIOR_CONSTANTS.hop_latency_s, "bus_efficiency": PRIOR_CONSTANTS.bus_efficiency},
        "left_out": left, "held_out_scorings": count,
        "summaries": {
            side: {label: {"shipped": summarize_cases(cs), **{b: summarize_cases(cs, b)
                                                              for b in (LINK_FIT, PRIOR, BANDWIDTH_ONLY)}}
                   for label, cs in {**groups["band"], **groups["config"]}.items() if cs}
            for side, groups in (("test", test_groups), ("train", train_groups))}})
    print("\n".join(lines[:40]))


if __name__ == "__main__":
    main()
