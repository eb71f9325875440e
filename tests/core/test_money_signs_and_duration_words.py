"""Money prints with the sign gpuwise reads back as the same currency (`£12.00`, as `£20` is read), and durations take
the unit words people write (`--deadline "2 days"`); a refused duration says in one line which forms are accepted."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from gpuwise.plan.money import yuan_or_yen
from gpuwise.units import CNY_PER_UNIT, UnitError, format_money, parse_duration_s, parse_money


@pytest.mark.parametrize("sign", ["¥", "$", "€", "£"])
def test_a_currency_read_from_a_sign_prints_with_that_sign(sign):
    # before: parse_money read "£20" as GBP, but format_money printed GBP as "12.00 GBP" (its sign table lacked £)
    amount, currency = parse_money(f"{sign}12")
    assert format_money(amount, currency) == f"{sign}12.00"
    assert format_money(-amount, currency) == f"-{sign}12.00"


@pytest.mark.parametrize("currency", sorted(CNY_PER_UNIT))
def test_every_known_currency_prints_as_something_read_back_as_that_currency(currency):
    # HKD and JPY keep their code: "$" reads as USD and "¥" as CNY, so a sign would be read back as another currency.
    # before: no amount over 999 was read back, its thousands separator refused ("not an amount of money: '¥1,234.50'")
    assert parse_money(format_money(1234.5, currency)) == (1234.5, currency)
    assert parse_money(format_money(1234567, currency)) == (1234567, currency)


@pytest.mark.parametrize("text", ["12,34", "1,5", "$1,2345", ",100"])
def test_a_comma_that_is_no_thousands_separator_is_refused(text):
    with pytest.raises(UnitError):
        parse_money(text)


@pytest.mark.parametrize("words, short", [("2 days", "2d"), ("1.5 days", "1.5d"), ("1 day", "1d"), ("36 hours", "36h"),
                                          ("1 hour", "1h"), ("2 hrs", "2h"), ("90 minutes", "90m"), ("10 mins", "10m"),
                                          ("30 seconds", "30s"), ("2 weeks", "2w"), ("1 day 12 hours", "1d12h")])
def test_a_duration_in_words_is_the_same_as_in_short_units(words, short):
    # before: "2 days" was refused: unknown unit 'days' (use ms, s, m, h, d, w), while "min", "hr" and "sec" were read
    assert parse_duration_s(words) == parse_duration_s(short)
    assert parse_duration_s(words.upper()) == parse_duration_s(short)


@pytest.mark.parametrize("text", ["2 fortnights", "soon", "2 days and 3 hours"])
def test_a_refused_duration_names_the_accepted_forms_with_an_example(text):
    with pytest.raises(UnitError) as err:
        parse_duration_s(text, examples="12h, 90m, 2d")
    said = str(err.value)
    assert "\n" not in said and repr(text) in said
    assert "examples: 12h, 90m, 2d" in said                      # an example of the forms accepted
    assert "ms, s, m, h, d, w" in said and "days" in said     # the units, short and as words


def test_deadline_in_days_is_read_and_a_refused_one_exits_2_naming_the_forms():
    refused = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "recommend", "resnet50", "--steps", "100",
                              "--deadline", "2 fortnights"], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("gpuwise: error: --deadline: ") and "examples: 12h, 90m, 2d" in line and "2 days" in line


def test_a_duration_with_a_tab_between_number_and_word_is_read():
    assert parse_duration_s("2\tdays") == parse_duration_s("2 days") == 2 * 86400


def test_the_yen_refusal_suggests_amounts_that_read_back():
    """A review's finding: '¥1,234,567' ranked in yen suggested '1.23457e+06CNY', which parse_money refuses."""
    why = yuan_or_yen("¥1,234,567", "JPY")
    suggested = re.findall(r"write (\S+) or (\S+)$", why)[0]
    assert [parse_money(s) for s in suggested] == [(1234567.0, "CNY"), (1234567.0, "JPY")]


def test_the_yen_refusal_keeps_an_amount_under_a_cent():
    why = yuan_or_yen("¥0.004", "JPY")
    assert why.endswith("write 0.004CNY or 0.004JPY")
