"""benchmarks/kernel_laws.py's heat-held rule (benchmarks/README.md, sixteenth session): a file of dense kernels
whose achieved rate falls as the work grows is left out of every fit; a flat or rising one is not; a bin of too
few rows does not count; a file with fewer than two filled bins is never held. And the joint fit of the CUDA-core
level returns the law of every class it fitted, so the companion's law is the one fitted with the level."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import kernel_laws as kl


def _rows(files: dict[tuple[str, str], list[tuple[float, float, int]]]) -> kl.Rows:
    """Rows of square SGEMMs: per file, (GFLOP, achieved share of a 10 TFLOPS peak, rows) per bin."""
    gpu, folder, flops, share = [], [], [], []
    for (g, f), bins in files.items():
        for gflop, s, n in bins:
            gpu += [g] * n
            folder += [f] * n
            flops += list(gflop * 1e9 * np.linspace(0.99, 1.01, n))
            share += [s] * n
    flops, share = np.array(flops), np.array(share)
    side = (flops / 2) ** (1 / 3)
    peak = np.full(len(flops), 10e12)
    n = len(flops)
    dims = {"batch": np.ones(n), "m": side, "n": side, "k": side, "bytes": np.zeros(n)}
    return kl.Rows(np.array(gpu), flops / (share * peak), np.zeros(n), np.array(folder), np.full(n, 80.0), peak,
                   np.full(n, 1e12), dims, np.full(n, 250.0), np.full(n, 64.0), np.full(n, 12.0), np.zeros(n, bool))


def test_a_file_whose_rate_falls_with_the_work_is_heat_held_and_a_rising_one_is_not():
    r = _rows({("hot", "linear"): [(3, 0.36, 30), (20, 0.29, 30), (60, 0.21, 30), (2000, 0.15, 30)],
               ("cool", "linear"): [(3, 0.6, 30), (20, 0.8, 30), (2000, 0.78, 30)],
               ("edge", "linear"): [(3, 0.8, 30), (2000, 0.57, 30)]})      # 0.7125 of its best: kept
    held = kl.heat_held_files(r)
    assert list(held) == [("hot", "linear")]
    assert held[("hot", "linear")][0] == pytest.approx(0.36) and held[("hot", "linear")][-1] == pytest.approx(0.15)


def test_a_thin_bin_does_not_count_and_one_bin_is_never_held():
    r = _rows({("thin", "linear"): [(3, 0.8, 30), (2000, 0.1, kl.HEAT_MIN_BIN_ROWS - 1)],
               ("one", "linear"): [(3, 0.8, 30)],
               ("small", "linear"): [(0.1, 0.9, 30), (3, 0.2, 30)]})   # under 1 GFLOP: no bin (kernels ramp)
    assert kl.heat_held_files(r) == {}
    shares = kl.file_bin_shares(r)
    assert np.isnan(shares[("thin", "linear")][-1]) and shares[("small", "linear")][0] == pytest.approx(0.2)


def test_heat_held_rows_enter_no_fit():
    r = _rows({("hot", "linear"): [(3, 0.36, 30), (2000, 0.15, 30)], ("cool", "linear"): [(3, 0.6, 30)]})
    r.heat_held = np.array([g == "hot" for g in r.gpu])
    assert set(r.gpu[kl._fit_rows(r, ["hot", "cool"])]) == {"cool"}


def test_the_joint_level_fit_returns_the_law_of_each_class_it_fitted():
    lin = _rows({("a", "linear"): [(3, 0.6, 20), (30, 0.7, 20)], ("b", "linear"): [(3, 0.5, 20), (30, 0.6, 20)]})
    bmm = _rows({("a", "bmm"): [(3, 0.5, 20), (30, 0.6, 20)], ("b", "bmm"): [(3, 0.4, 20), (30, 0.5, 20)]})
    laws, level = kl.fit("linear", lin, ["a", "b"], companion=("bmm", bmm))
    assert set(laws) == {"linear", "bmm"} and laws["linear"] != laws["bmm"]
    assert level.full_w_per_tflops > 0
