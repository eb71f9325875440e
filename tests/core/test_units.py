import pytest

from gpuwise.units import UnitError, format_money, parse_bytes, parse_duration_s, parse_money


@pytest.mark.parametrize(
    "text, expected",
    [("24GB", 24 * 10**9), ("16GiB", 16 * 2**30), ("512", 512), ("1.5 gb", 1_500_000_000), ("80G", 80 * 10**9)],
)
def test_parse_bytes_reads_decimal_and_binary_units(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "12 parsecs", "-3GB"])
def test_parse_bytes_refuses_garbage_naming_it(text):
    with pytest.raises(UnitError, match="not a size"):
        parse_bytes(text)


@pytest.mark.parametrize(
    "text, expected", [("12h", 43200), ("90m", 5400), ("1d12h", 129600), ("3600", 3600), ("2.5h", 9000)]
)
def test_parse_duration_accepts_compound_units(text, expected):
    assert parse_duration_s(text) == expected


@pytest.mark.parametrize("text", ["tomorrow", "12x", "0h", "h12", "1h-2m"])
def test_parse_duration_refuses_malformed_and_non_positive(text):
    with pytest.raises(UnitError):
        parse_duration_s(text)


def test_parse_money_keeps_currency_when_given():
    assert parse_money("300") == (300.0, None)
    assert parse_money("¥300") == (300.0, "CNY")
    assert parse_money("25usd") == (25.0, "USD")
    with pytest.raises(UnitError):
        parse_money("lots")
    with pytest.raises(UnitError):
        parse_money("-5")


def test_format_money_uses_symbol_for_known_currencies():
    assert format_money(1234.5, "CNY") == "¥1,234.50"
    assert format_money(3, "GBP") == "£3.00"


def test_format_bytes_prints_memory_in_binary_units_as_pytorch_and_nvidia_smi_count_it():
    from gpuwise.units import format_bytes

    assert format_bytes(0) == "0 B"
    assert format_bytes(47 * 2**20) == "47.0 MiB"
    assert format_bytes(22_100_000_000) == "20.6 GiB"
    assert format_bytes(24 * 2**30) == "24.0 GiB"  # an RTX 4090 as `gpuwise gpus` lists it, not 25.8 GB
    assert format_bytes(512 * 2**10) == "512.0 KiB"
    assert format_bytes(2**30, "GiB") == "1.0 GiB"
    assert format_bytes(10**9, "GB") == "1.0 GB"


@pytest.mark.parametrize("text, expected", [
    ("100元", (100.0, "CNY")), ("100 RMB", (100.0, "CNY")), ("100rmb", (100.0, "CNY")), ("25 usd", (25.0, "USD")),
])
def test_money_as_autodl_users_write_it(text, expected):
    # "--budget 100元" and "100RMB" were refused
    assert parse_money(text) == expected


def test_a_request_rate_reads_as_people_say_it():
    from gpuwise.units import format_request_rate

    assert [format_request_rate(x) for x in (1.0, 0.25, 3.6301, 150.4, 1234.5)] == [
        "1 request/s", "0.25 requests/s", "3.63 requests/s", "150 requests/s", "1,234 requests/s"]


def test_a_negative_amount_of_money_is_told_it_must_be_positive_as_zero_is():
    # was: "--budget -5" said "not an amount of money: '-5'" where "--budget 0" said "amount must be positive"
    from gpuwise.units import UnitError, parse_money

    for text in ("-5", "-¥300", "-25USD", "-0.5 eur"):
        with pytest.raises(UnitError, match="amount must be positive"):
            parse_money(text)
    with pytest.raises(UnitError, match="not an amount of money"):
        parse_money("five")
