"""A run's GPU the catalog cannot resolve is refused for its own reason: a near miss keeps its "did you mean" (and
the way to add a GPU the catalog lacks), a known GPU with a MIG profile it cannot have says that, not "add it as a
[[gpu]] table" (was: every catalog error read as a missing GPU)."""

from __future__ import annotations

import pytest

from gpuwise.calibrate.errors import CalibrateError
from gpuwise.calibrate.rows import measured_gpu
from gpuwise.catalog import load_catalog
from gpuwise.units import currency_code


class Measured:
    gpu = None
    source = "run.db"

    def __init__(self, name: str):
        self.gpu_name = name


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(user_file=False)


def refusal(catalog, name: str) -> str:
    with pytest.raises(CalibrateError) as info:
        measured_gpu(Measured(name), catalog)
    return str(info.value)


def test_a_near_miss_keeps_its_suggestions(catalog):
    said = refusal(catalog, "NVIDIA GeForce RTX 5090 D")
    assert "did you mean: rtx-5090" in said and "[[gpu]]" in said


def test_a_bad_mig_profile_is_not_a_missing_gpu(catalog):
    said = refusal(catalog, "NVIDIA A100-SXM4-40GB MIG 7g.80gb")
    assert "MIG profile '7g.80gb'" in said and "[[gpu]]" not in said


def test_a_gpu_resembling_none_is_told_how_to_add_it(catalog):
    said = refusal(catalog, "NVIDIA TITAN RTX")
    assert "is not in the catalog: add it as a [[gpu]] table" in said


def test_a_currency_symbol_is_its_code():
    assert [currency_code(w) for w in ("¥", "￥", "$", "€", "rmb", "usd")] == ["CNY", "CNY", "USD", "EUR", "CNY", "USD"]
