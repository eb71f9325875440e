"""Parsing and formatting of quantities with units: bytes, durations, money.

Every parser raises :class:`UnitError` (a :class:`GpuwiseError`) naming the bad text.
"""

from __future__ import annotations

import math
import re

from gpuwise.errors import GpuwiseError


class UnitError(GpuwiseError):
    pass


_BYTE_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
}
# Seconds per duration unit, as written after a number: the short form first, then the words ("2 days", "90 minutes")
_DURATION_UNITS = {
    "ms": 1e-3,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}
# The signs gpuwise reads before an amount, and the one it prints for each currency (the first given for it): a currency
# prints with a sign only where the sign reads back as that currency. HKD and JPY print as codes: "$" reads as USD and
# "¥" as CNY here (AutoDL's prices), so "HK$" or a yen sign would be read back as another currency.
_CURRENCY_SYMBOLS = {"¥": "CNY", "￥": "CNY", "$": "USD", "€": "EUR", "£": "GBP"}
_SYMBOL_PRINTED = {code: sign for sign, code in reversed(_CURRENCY_SYMBOLS.items())}   # reversed: the first sign wins
# What people write after an amount for the same currencies ("100元" on AutoDL, "100 RMB")
_CURRENCY_WORDS = {"元": "CNY", "rmb": "CNY", "yuan": "CNY", "usd": "USD", "eur": "EUR"}


def currency_code(written: str) -> str:
    """A currency as gpuwise stores and prints it: the ISO code, any case ("cny" is CNY), and a word people write for
    one as its code ("RMB", "yuan", "元", "¥": CNY, as AutoDL prices are written). Anything else upper-cased, for the
    caller to judge (an exchange rate, an offer's check)."""
    word = str(written).strip()
    return _CURRENCY_SYMBOLS.get(word) or _CURRENCY_WORDS.get(word.lower(), word.upper())

# Units of CNY per unit of each currency (indicative mid-market rates), used to rank prices in one currency.
# Its keys are the currencies gpuwise knows: a catalog offer in any other is refused when the catalog loads.
RATES_CHECKED = "2026-11-20"
CNY_PER_UNIT = {"CNY": 1.0, "USD": 7.2, "EUR": 7.8, "HKD": 0.92, "JPY": 0.048, "GBP": 9.1}


def parse_bytes(text: str, *, unit_required: bool = False) -> int:
    """'24GB' -> 24e9, '16GiB' -> 16*2**30, '512' -> 512. Decimal GB as GPU vendors print them.

    ``unit_required``: a bare number is refused (what a user types as a GPU size: "80" means 80 GB to
    them, 80 bytes here)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _BYTE_UNITS:
        raise UnitError(f"not a size: {text!r} (examples: 24GB, 16GiB, 512MB)")
    if unit_required and not m.group(2):
        raise UnitError(f"{text!r} has no unit: write {m.group(1)}GB or {m.group(1)}GiB")
    value = float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()]
    return int(round(value))


def parse_duration_s(text: str, *, examples: str = "12h, 90m, 1d12h, 3600") -> float:
    """'12h' -> 43200, '90m' -> 5400, '1d12h' -> 129600, '3600' -> 3600 (seconds). ``examples``: the valid
    forms a refusal names (a caller that refuses bare numbers leaves out 3600)."""
    s = str(text).strip().lower()
    if s.startswith("-"):
        raise UnitError(f"duration must be positive: {text!r} (examples: {examples})")
    if re.fullmatch(r"[0-9]*\.?[0-9]+", s):
        total = float(s)
    else:
        parts = re.findall(r"([0-9]*\.?[0-9]+)\s*([a-z]+)", s)
        if not parts or "".join(f"{a}{b}" for a, b in parts) != re.sub(r"\s", "", s):
            raise UnitError(f"not a duration: {text!r} ({duration_forms(examples)})")
        total = 0.0
        for number, unit in parts:
            if unit not in _DURATION_UNITS:
                raise UnitError(f"not a duration: {text!r}: unknown unit {unit!r} ({duration_forms(examples)})")
            total += float(number) * _DURATION_UNITS[unit]
    if not math.isfinite(total) or total <= 0:
        raise UnitError(f"duration must be positive: {text!r} (examples: {examples})")
    return total


def duration_forms(examples: str) -> str:
    """What a refused duration is told it may be: ``examples``, the short units (each unit's first spelling in
    ``_DURATION_UNITS``) and that its words work too."""
    short: dict[float, str] = {}
    for unit, seconds in _DURATION_UNITS.items():
        short.setdefault(seconds, unit)
    return f"examples: {examples}; units: {', '.join(short.values())}, or words: 2 days, 36 hours, 90 minutes"


# an amount with its currency before it (a sign or a code: $25, USD 25) or after it (a code or a word: 25USD, 300元);
# the amount with thousands separators as format_money prints it (¥1,234.50), or without
_MONEY = re.compile(rf"(?P<before>[A-Za-z]{{3,4}}|{'|'.join(map(re.escape, _CURRENCY_SYMBOLS))})?\s*"
                    r"(?P<amount>[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]*\.?[0-9]+)"
                    r"\s*(?P<after>[A-Za-z]{3,4}|元)?")


def parse_money(text: str) -> tuple[float, str | None]:
    """'300' -> (300, None); '¥300', '300元', '300 RMB' -> (300, 'CNY'); '25 USD', 'USD25', 'USD 25', '$25' ->
    (25, 'USD'); '£20' -> (20, 'GBP'); '¥1,234.50' -> (1234.5, 'CNY'), as format_money prints it. A currency
    before or after the amount, a sign or a code, not both unless they agree ('$25 USD'). Currency None = any; a
    code gpuwise has no rate for is the caller's to refuse."""
    s = str(text).strip()
    negative = s.startswith("-")      # refused below as 0 is, once it reads as an amount
    s = s.removeprefix("-").strip()
    m = _MONEY.fullmatch(s)
    if not m:
        raise UnitError(f"not an amount of money: {text!r} (examples: 300, ¥300, 300元, 25USD)")
    written = {currency_code(w) for w in m.group("before", "after") if w}
    if len(written) > 1:
        raise UnitError(f"{text!r} names two currencies ({' and '.join(sorted(written))}): write one")
    currency = written.pop() if written else None
    amount = float(m.group("amount").replace(",", ""))
    if amount <= 0 or negative:
        raise UnitError(f"amount must be positive: {text!r}")
    if not math.isfinite(amount):     # 400 digits read as a float are infinite
        raise UnitError(f"amount too large: {str(text)[:20]!r}… ({len(str(text))} characters)")
    return amount, currency


def format_bytes(n_bytes: float, unit: str | None = None) -> str:
    """Binary units, labelled, as PyTorch and nvidia-smi count memory: GiB from 1 GiB up, MiB, KiB below.

    One unit for memory everywhere (a 24 GiB GPU prints as 24.0 GiB, never 25.8 GB); ``unit`` forces one.
    """
    if unit is None and n_bytes == 0:
        return "0 B"
    if unit is None:
        size = abs(n_bytes)
        unit = "GiB" if size >= 2**30 else ("MiB" if size >= 2**20 else "KiB")
    div = _BYTE_UNITS[unit.lower()]
    return f"{n_bytes / div:.1f} {unit}"


YEAR_S = 365.25 * 86400


def format_duration(seconds: float) -> str:
    """``12.3 ms`` .. ``4.2 d``; past a year in years, with thousands separators (``40,313,000 years``), never
    ``1272164226.3 d``."""
    if seconds >= YEAR_S:
        years = seconds / YEAR_S
        return f"{years:.1f} years" if years < 100 else f"{float(f'{years:.4g}'):,.0f} years"
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def format_samples_rate(per_s: float) -> str:
    """``123.4``; under one a second two significant digits (``0.0042``), never ``0.0`` for a slow step."""
    if not per_s or per_s >= 1 or not math.isfinite(per_s):
        return f"{per_s:.1f}"
    return f"{per_s:.{1 - math.floor(math.log10(per_s))}f}"


def format_request_rate(per_s: float) -> str:
    """``1 request/s``, ``2.5 requests/s``, ``0.25 requests/s`` (LLM serving loads)."""
    text = f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.3g}"
    return f"{text} request/s" if text == "1" else f"{text} requests/s"


def format_count(count: int, noun: str) -> str:
    """``1 sample``, ``8 samples``, ``1,024 samples``: a whole count with its noun, singular for one."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


MONEY_DECIMALS = 2   # format_money's figure: an amount as every table and line shows it


def format_money(amount: float, currency: str, *, nonzero: bool = False) -> str:
    """``¥1,234.50``, ``-$0.20`` (the sign before the symbol), ``£12.00``; a currency whose sign gpuwise would read
    back as another (``_SYMBOL_PRINTED``) after the figure as its code: ``12.00 HKD``. ``nonzero``: an amount under
    a tenth keeps two significant digits (``$0.0025``, ``¥0.018``), so that a difference never reads as ``$0.00``."""
    symbol = _SYMBOL_PRINTED.get(currency)
    figure = (f"{abs(amount):.2g}" if nonzero and 0 < abs(amount) < 0.1 and math.isfinite(amount)
              else f"{abs(amount):,.{MONEY_DECIMALS}f}")
    if "e" in figure:
        figure = f"{abs(amount):.{1 - math.floor(math.log10(abs(amount)))}f}"
    sign = "-" if float(figure.replace(",", "")) > 0 and amount < 0 else ""
    return f"{sign}{symbol}{figure}" if symbol else f"{sign}{figure} {currency}"
