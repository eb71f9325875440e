"""Comparing prices in different currencies: indicative exchange rates, dated, overridable.

Recommendations rank options by cost in one currency. Offers keep their own currency in the output;
only the ranking converts, with these rates, and the output says which rates it used.
"""

from __future__ import annotations

import math

from gpuwise.plan.errors import PlanError

from gpuwise.units import CNY_PER_UNIT, MONEY_DECIMALS, RATES_CHECKED, parse_money  # noqa: F401 (the rates live on the ground floor: the catalog checks currencies)


MoneyError = PlanError   # the plan part's one error type

TIED_COST_DIGITS = 3      # significant digits two costs that read 0.00 share to be a tie


def convert(amount: float, from_currency: str, to_currency: str) -> float:
    try:
        return amount * CNY_PER_UNIT[from_currency] / CNY_PER_UNIT[to_currency]
    except KeyError as exc:
        raise MoneyError(
            f"no exchange rate for {exc.args[0]!r}; known currencies: {', '.join(sorted(CNY_PER_UNIT))}"
        ) from None


def shown_cost(amount: float) -> float:
    """``amount`` as options are ranked by: as it reads, to the hundredth of its currency (``units.format_money``'s
    figure), so that two costs that read the same are a tie, which the faster option wins, and not a difference of
    a thousandth of a cent (how each option's last, short batch rounds its step count: $0.2600067 and $0.26). A cost
    that reads 0.00 keeps ``TIED_COST_DIGITS`` significant digits: sub-cent costs (a short inference job) are still
    told apart (¥0.00063 is cheaper than ¥0.00077), not all tied at nothing."""
    if amount <= 0 or not math.isfinite(amount):
        return amount
    if round(amount, MONEY_DECIMALS) > 0:
        return round(amount, MONEY_DECIMALS)
    return round(amount, TIED_COST_DIGITS - 1 - math.floor(math.log10(amount)))


def rates_in(currency: str) -> dict[str, float]:
    """Units of ``currency`` per unit of each known currency: the rates a ranking in it used."""
    if currency not in CNY_PER_UNIT:
        raise MoneyError(f"no exchange rate for {currency!r}; known currencies: {', '.join(sorted(CNY_PER_UNIT))}")
    return {c: round(v / CNY_PER_UNIT[currency], 6) for c, v in sorted(CNY_PER_UNIT.items())}


# ¥ (and the full-width ￥) is the sign of both the yuan and the yen: gpuwise reads it as yuan (CNY), the
# currency of the providers it ships, except where yen is in play (``yuan_or_yen``); yen is written JPY.
YUAN_SIGNS = ("¥", "￥")


def yuan_or_yen(text: str, ranking_currency: str | None) -> str | None:
    """Why ``text`` (a price or budget) is ambiguous where costs are ranked in ``ranking_currency``: a ¥ amount
    where the ranking is in yen could mean either (None: not ambiguous; ¥ is then yuan)."""
    if ranking_currency != "JPY" or not str(text).strip().startswith(YUAN_SIGNS):
        return None
    amount, _ = parse_money(text)
    return (f"{str(text).strip()} is ambiguous: ¥ is both yuan and yen, and costs are ranked in JPY here; write "
            f"{_plain(amount)}CNY or {_plain(amount)}JPY")


def _plain(amount: float) -> str:
    """``1234567``, ``12.5``, ``0.004``: an amount as parse_money reads it back (no exponent, no trailing zeros)."""
    return f"{amount:.10f}".rstrip("0").rstrip(".")


def parse_price(text: str, *, ranking_currency: str | None = None) -> tuple[float, str | None]:
    """(amount, ISO code or None) of a price or budget a user typed (``¥15``, ``2.5USD``, ``300``): a finite amount
    > 0 (``units.parse_money``: UnitError otherwise) in a currency with an exchange rate (MoneyError otherwise).
    ``¥`` is yuan (CNY), except where costs are ranked in yen (``ranking_currency`` JPY): ambiguous there, refused
    (``yuan_or_yen``). The one rule for every money option; the CLI and ``report`` add the option's name to the
    error."""
    amount, currency = parse_money(text)
    if (why := yuan_or_yen(text, ranking_currency)) is not None:
        raise MoneyError(why)
    if currency is not None:
        rates_in(currency)
    return amount, currency
