"""Comparing prices in different currencies: indicative exchange rates, dated, overridable.

Recommendations rank options by cost in one currency. Offers keep their own currency in the output;
only the ranking converts, with these rates, and the output says which rates it used.
"""

from __future__ import annotations

from gpuwise.plan.errors import PlanError

from gpuwise.units import CNY_PER_UNIT, RATES_CHECKED, parse_money  # noqa: F401 (the rates live on the ground floor: the catalog checks currencies)


MoneyError = PlanError   # the plan part's one error type


def convert(amount: float, from_currency: str, to_currency: str) -> float:
    try:
        return amount * CNY_PER_UNIT[from_currency] / CNY_PER_UNIT[to_currency]
    except KeyError as exc:
        raise MoneyError(
            f"no exchange rate for {exc.args[0]!r}; known currencies: {', '.join(sorted(CNY_PER_UNIT))}"
        ) from None


def rates_in(currency: str) -> dict[str, float]:
    """Units of ``currency`` per unit of each known currency: the rates a ranking in it used."""
    if currency not in CNY_PER_UNIT:
        raise MoneyError(f"no exchange rate for {currency!r}; known currencies: {', '.join(sorted(CNY_PER_UNIT))}")
    return {c: round(v / CNY_PER_UNIT[currency], 6) for c, v in sorted(CNY_PER_UNIT.items())}


def parse_price(text: str) -> tuple[float, str | None]:
    """(amount, ISO code or None) of a price or budget a user typed (``¥15``, ``2.5USD``, ``300``): a finite amount
    > 0 (``units.parse_money``: UnitError otherwise) in a currency with an exchange rate (MoneyError otherwise).
    The one rule for every money option; the CLI and ``report`` add the option's name to the error."""
    amount, currency = parse_money(text)
    if currency is not None:
        rates_in(currency)
    return amount, currency
