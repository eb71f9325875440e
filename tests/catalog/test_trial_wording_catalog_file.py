"""A new user's trial of catalog files: a size given as a number, a size without its unit, a TOML date-time for
`checked`, a currency in lower case, and a GPU of their own shown without the `*` a variant gets."""

from __future__ import annotations

import datetime

import pytest

from gpuwise.catalog import CatalogError, load_catalog
from gpuwise.units import UnitError, parse_bytes

TITAN = """
[[gpu]]
id = "titan-rtx"
name = "NVIDIA TITAN RTX"
arch = "turing"
compute_capability = "7.5"
sm_count = 72
cuda_cores = 4608
tensor_cores = 576
memory = {memory}
memory_bandwidth_gbs = 672
l2 = "6MiB"
peak_tflops = {{ fp32 = 16.3, fp16 = 130.5, int8 = 261 }}
tdp_w = 280
pcie_gen = 3
source = "NVIDIA TITAN RTX spec page"
{extra}
"""

OFFER = """
[[offer]]
provider = "lab"
gpu = "t4"
price_per_hour = 1.0
currency = {currency}
source = "our invoice"
checked = {checked}
"""

LAST_WEEK = datetime.date.today() - datetime.timedelta(days=7)


def load(tmp_path, text: str):
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return load_catalog(path, user_file=False)


def refusal(tmp_path, text: str) -> str:
    with pytest.raises(CatalogError) as err:
        load(tmp_path, text)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_size_given_as_a_number_is_refused_with_the_two_forms_it_may_take(tmp_path):
    # before: "key 'memory' must be a string, got 24", no hint of "24GiB" or memory_bytes
    message = refusal(tmp_path, TITAN.format(memory="24", extra=""))
    assert "key 'memory'" in message and message.endswith("got 24")
    assert 'memory = "24GiB"' in message and f"memory_bytes = {24 * 2**30}" in message


@pytest.mark.parametrize("figure", ["inf", "-inf", "nan", "0"])
def test_a_size_given_as_a_number_that_is_no_size_is_refused_in_one_line(tmp_path, figure):
    # memory = inf crashed the hint with OverflowError (a traceback) instead of the one-line refusal
    message = refusal(tmp_path, TITAN.format(memory=figure, extra=""))
    assert "key 'memory'" in message and 'memory = "24GiB"' in message


def test_a_size_without_a_unit_is_refused_as_min_memory_refuses_it(tmp_path):
    # before: "48 is not between 1 GiB and 1 TiB: a unit mix-up?" (read as 48 bytes); --min-memory 48 says "has no unit"
    message = refusal(tmp_path, TITAN.format(memory='"48"', extra=""))
    with pytest.raises(UnitError) as min_memory_rule:
        parse_bytes("48", unit_required=True)
    assert message.endswith(f"key 'memory': {min_memory_rule.value}")
    assert "has no unit" in message


@pytest.mark.parametrize("written", [
    f"{LAST_WEEK.isoformat()}T10:00:00",
    f"{LAST_WEEK.isoformat()}T23:30:00-08:00",
    f"{LAST_WEEK.isoformat()} 06:00:00Z",
])
def test_a_toml_date_time_for_checked_is_read_as_its_date(tmp_path, written):
    # before: "key 'checked' must be a string, got 2026-12-02T10:00:00" though the docs accept a TOML date
    catalog = load(tmp_path, OFFER.format(currency='"CNY"', checked=written))
    (offer,) = [o for o in catalog.offers if o.provider == "lab"]
    assert offer.checked == LAST_WEEK.isoformat()


def test_a_time_alone_for_checked_is_refused_saying_what_is_accepted(tmp_path):
    message = refusal(tmp_path, OFFER.format(currency='"CNY"', checked="10:00:00"))
    assert "key 'checked' must be a date" in message and "date-time" in message and message.endswith("got 10:00:00")


@pytest.mark.parametrize("written", ['"cny"', '"Cny"', '" cny "'])
def test_a_currency_in_any_case_is_its_iso_code(tmp_path, written):
    # before: "'cny' is not an ISO currency code like CNY or USD", while providers are case-insensitive
    catalog = load(tmp_path, OFFER.format(currency=written, checked=f'"{LAST_WEEK.isoformat()}"'))
    (offer,) = [o for o in catalog.offers if o.provider == "lab"]
    assert offer.currency == "CNY"


def test_your_full_gpu_table_is_as_unverified_as_a_variant(tmp_path):
    # before: titan-rtx (a full [[gpu]] table) was shown without the "*" that a based_on variant gets
    variant = '\n[[gpu]]\nid = "rtx-4090-48gb"\nbased_on = "rtx-4090"\nmemory = "48GiB"\n'
    catalog = load(tmp_path, TITAN.format(memory='"24GiB"', extra="") + variant)
    assert not catalog.gpu("titan-rtx").verified and not catalog.gpu("rtx-4090-48gb").verified


def test_your_gpu_that_says_it_is_verified_is(tmp_path):
    catalog = load(tmp_path, TITAN.format(memory='"24GiB"', extra="verified = true"))
    assert catalog.gpu("titan-rtx").verified


def test_your_gpu_is_starred_in_the_gpus_table(tmp_path, cli_run):
    path = tmp_path / "mine.toml"
    path.write_text(TITAN.format(memory='"24GiB"', extra=""))
    code, out, err = cli_run("gpus", "titan-rtx", "t4", "--catalog", str(path))
    assert code == 0, err
    first_cells = {line.split()[0] for line in out.splitlines() if line.startswith(" ") and line.split()}
    assert {"titan-rtx*", "t4"} <= first_cells
