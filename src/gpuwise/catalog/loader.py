"""Reading catalogs from TOML: the built-in data files, the user's file, and ``--catalog FILE``.

Layers apply in that order; a later layer adds GPUs and offers or replaces those with the same
identity (a GPU's id; an offer's provider, GPU, count and spot-ness); within one file an identity is
given once. Each file is parsed and validated whole before anything from it is used, so a malformed
file is refused and nothing of it is half-loaded. An offer for a MIG slice adds the slice as a GPU.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import json
import os
import sys
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from gpuwise.catalog.model import GPU, PRECISIONS, Catalog, CatalogError, Offer, today_date
from gpuwise.catalog.resolve import gpu_by_name, name_index, provider_key
from gpuwise.catalog.topology import provider_name
from gpuwise.catalog.validate import gpu_problems, offer_problems
from gpuwise.units import UnitError, currency_code, parse_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_INT, _NUM, _STR, _BOOL, _STRS = "a whole number", "a number", "a string", "true or false", "a list of strings"
_SIZE = "a size with its unit, as a string"
_DATE = "a date, like 2026-12-01 (quoted or not; a date-time's date is used)"
# The unit a refused bare size is shown with: `memory = 24` -> memory = "24GiB" (or memory_bytes = 25769803776).
_SIZE_EXAMPLE_UNIT = {"memory": "GiB", "l2": "MiB", "nvml_memory": "MiB"}

# TOML key -> the type it must have. `memory`/`l2` take sizes with units ("24GiB", "6MiB"); the GPU
# fields memory_bytes/l2_bytes may be given in bytes instead.
_GPU_KEYS: dict[str, str] = {
    "id": _STR, "name": _STR, "arch": _STR, "compute_capability": _STR, "form_factor": _STR,
    "sm_count": _INT, "cuda_cores": _INT, "tensor_cores": _INT,
    "memory": _SIZE, "memory_bytes": _INT, "l2": _SIZE, "l2_bytes": _INT,
    "nvml_memory": _SIZE, "nvml_memory_bytes": _INT,
    "memory_bandwidth_gbs": _NUM, "tdp_w": _NUM, "pcie_gen": _INT, "nvlink_gbs": _NUM,
    "peak_tflops": "a table of precision = TFLOPS", "source": _STR, "aliases": _STRS, "nvml_names": _STRS,
    "verified": _BOOL, "notes": _STR, "based_on": _STR, "ecc_reserves_memory": _BOOL, "process_nm": _NUM,
    "geforce": _BOOL, "intra_link": _STR, "gpus_per_node": _INT,
}
_NOT_FIELDS = ("memory", "l2", "nvml_memory", "based_on", "peak_tflops")  # converted before they become fields
_GPU_REQUIRED = ("id", "name", "arch", "compute_capability", "sm_count", "cuda_cores", "tensor_cores",
                 "memory_bandwidth_gbs", "peak_tflops", "tdp_w", "pcie_gen", "source")
# Every key a full [[gpu]] table needs, in the order the docs' example gives them: a size as `memory` or `memory_bytes`
_GPU_NEEDED = (*_GPU_REQUIRED[:8], "memory", "l2", *_GPU_REQUIRED[8:])
_OFFER_KEYS: dict[str, str] = {
    "provider": _STR, "gpu": _STR, "gpu_id": _STR, "count": _INT, "price_per_hour": _NUM, "currency": _STR,
    "spot": _BOOL, "source": _STR, "checked": _DATE, "indicative": _BOOL, "region": _STR,
}
_OFFER_REQUIRED = ("provider", "price_per_hour", "currency", "source", "checked")
_TOP_KEYS = ("gpu", "offer")


def user_config_dir() -> Path:
    """~/.config/gpuwise, moved by GPUWISE_CONFIG_DIR or XDG_CONFIG_HOME: every user file of gpuwise lives here."""
    if os.environ.get("GPUWISE_CONFIG_DIR"):
        return Path(os.environ["GPUWISE_CONFIG_DIR"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpuwise"


def user_catalog_path() -> Path:
    """~/.config/gpuwise/catalog.toml (see ``user_config_dir``)."""
    return user_config_dir() / "catalog.toml"


def missing_gpu_remedy(name: str) -> str:
    """How to go on with a GPU the catalog lacks, called ``name`` (as the driver names it): the [[gpu]] table to
    add, with every key it needs, and the two files gpuwise reads it from (docs/catalog.md)."""
    keys = ", ".join(k for k in _GPU_NEEDED if k != "name")
    return (f"add it as a [[gpu]] table with name = {json.dumps(name)} and {keys} (or based_on = a known GPU and "
            f"what differs; docs/catalog.md, \"Adding your own GPUs and prices\") to {user_catalog_path()} "
            "(read by default) or to a file passed with --catalog FILE")


def load_catalog(path: str | Path | None = None, *, user_file: bool = True) -> Catalog:
    """The built-in catalog, then the user's file (when ``user_file`` and it exists), then ``path``."""
    catalog = builtin_catalog()
    if user_file:
        user = user_catalog_path()
        if user.is_file():
            catalog = merge_file(catalog, user)
    if path is not None:
        p = Path(path).expanduser()
        if p.is_dir():
            raise CatalogError(f"catalog file {str(path)!r} is a directory, not a TOML file: give the catalog file "
                               "([[gpu]] and [[offer]] tables) with --catalog FILE")
        if not p.is_file():
            raise CatalogError(f"catalog file not found: {str(path)!r}")
        catalog = merge_file(catalog, p)
    return catalog


@lru_cache(maxsize=1)
def builtin_catalog() -> Catalog:
    """The shipped GPUs and indicative offers (parsed once per process)."""
    data = resources.files("gpuwise.catalog") / "data"
    catalog = Catalog(gpus=())
    for name in ("gpus.toml", "offers.toml"):
        text = (data / name).read_text(encoding="utf-8")
        catalog = merge_text(catalog, text, f"<built-in {name}>", offers_indicative=True)
    return catalog


def merge_file(catalog: Catalog, path: Path) -> Catalog:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read catalog file: {exc}") from None
    return merge_text(catalog, text, str(path), offers_indicative=False)


def merge_text(catalog: Catalog, text: str, origin: str, *, offers_indicative: bool) -> Catalog:
    """``catalog`` with the GPUs and offers of one TOML document added or replaced."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{origin}: not valid TOML: {exc}") from None
    for key in doc:
        if key not in _TOP_KEYS:
            raise CatalogError(f"{origin}: unknown key {key!r} (a catalog has [[gpu]] and [[offer]] tables)")
    gpu_tables = _tables(doc, "gpu", origin)
    offer_tables = _tables(doc, "offer", origin)

    gpus = {g.id: g for g in catalog.gpus}
    given_gpus: dict[str, int] = {}    # a GPU id (an offer's identity below) -> the entry of this file giving it
    for i, table in enumerate(gpu_tables):
        gpu = _parse_gpu(table, f"{origin}: gpu[{i}]", gpus)
        if gpu.id in given_gpus:
            raise CatalogError(f"{origin}: gpu[{i}]: GPU {gpu.id!r} is given twice in this file "
                               f"(gpu[{given_gpus[gpu.id]}] too): keep one")
        given_gpus[gpu.id] = i
        gpus[gpu.id] = gpu
    try:
        index = name_index(list(gpus.values()))
    except CatalogError as exc:
        raise CatalogError(f"{origin}: {exc}") from None

    offers = {_offer_identity(o): o for o in catalog.offers}
    given_offers: dict[tuple[str, str, int, bool], int] = {}
    for i, table in enumerate(offer_tables):
        offer, gpu = _parse_offer(table, f"{origin}: offer[{i}]", index, offers_indicative)
        identity = _offer_identity(offer)
        if identity in given_offers:
            spot = " spot" if offer.spot else ""
            raise CatalogError(f"{origin}: offer[{i}]: {offer.provider}'s {offer.count}x {offer.gpu_id}{spot} is given "
                               f"twice in this file (offer[{given_offers[identity]}] too): keep one")
        given_offers[identity] = i
        offers[identity] = offer
        gpus.setdefault(gpu.id, gpu)     # a MIG slice priced: a GPU of the catalog from now on
    return Catalog(gpus=tuple(gpus.values()), offers=tuple(offers.values()))


def _tables(doc: dict[str, Any], key: str, origin: str) -> list[dict[str, Any]]:
    tables = doc.get(key, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise CatalogError(f"{origin}: key {key!r} must be an array of tables, written [[{key}]]")
    return tables


def _offer_identity(o: Offer) -> tuple[str, str, int, bool]:
    return (provider_key(o.provider), o.gpu_id, o.count, o.spot)


def _check_types(table: dict[str, Any], where: str, schema: dict[str, str], required: tuple[str, ...]) -> None:
    for key, value in table.items():
        if key not in schema:
            raise CatalogError(f"{where}: unknown key {key!r}{_key_hint(key, schema)}")
        if not _has_type(value, schema[key]):
            raise CatalogError(f"{where}: key {key!r} must be {schema[key]}{_form_hint(key, value, schema)}, "
                               f"got {_as_written(value)}")
    _check_required(table, where, required)


def _key_hint(key: str, schema: dict[str, str]) -> str:
    """' (did you mean: price_per_hour?)': the keys closest to ``key``, each also known by its first word, so a
    misspelt word ('prise') finds the key it starts ('price_per_hour'); else the list of known keys."""
    by_word: dict[str, str] = {}
    for known in schema:
        by_word.setdefault(known, known)
        by_word.setdefault(known.split("_")[0], known)
    close = difflib.get_close_matches(key.lower(), list(by_word), n=6, cutoff=0.5)
    keys = list(dict.fromkeys(by_word[c] for c in close))[:3]
    return f" (did you mean: {', '.join(keys)}?)" if keys else f" (known keys: {', '.join(schema)})"


def _form_hint(key: str, value: Any, schema: dict[str, str]) -> str:
    """For a size key, the two forms it may take, with the figure given where it is a number:
    ' (memory = "24GiB", or memory_bytes = 25769803776)'."""
    if schema.get(key) != _SIZE:
        return ""
    unit = _SIZE_EXAMPLE_UNIT[key]
    figure = value if _has_type(value, _NUM) and 0 < value < float("inf") else 24   # inf, nan: the example's 24
    hint = f'{key} = "{figure:g}{unit}"'
    if f"{key}_bytes" in schema:
        hint += f", or {key}_bytes = {round(figure * parse_bytes('1' + unit))}"
    return f" ({hint})"


def _as_written(value: Any) -> str:
    """A value as the TOML file wrote it, for a message: a date or time as ISO text, true or false, not a Python
    repr."""
    if isinstance(value, bool):
        return str(value).lower()
    return value.isoformat() if isinstance(value, (datetime.date, datetime.time)) else repr(value)


def _toml_dates_as_text(table: dict[str, Any]) -> dict[str, Any]:
    """The table with a TOML date (``checked = 2026-12-01``, unquoted) as its ISO text, as if it were quoted; a
    date-time (``2026-12-01T10:00:00``, with or without an offset) as its date as written. A time alone stays (no
    date: refused as the wrong type)."""
    return {k: v.date().isoformat() if isinstance(v, datetime.datetime) else
            v.isoformat() if isinstance(v, datetime.date) else v for k, v in table.items()}


def _check_required(table: dict[str, Any], where: str, required: tuple[str, ...]) -> None:
    missing = [k for k in required if k not in table]
    if len(missing) == 1:
        raise CatalogError(f"{where}: key {missing[0]!r} is missing")
    if missing:
        raise CatalogError(f"{where}: keys {', '.join(map(repr, missing))} are missing")


def _has_type(value: Any, kind: str) -> bool:
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in (_STR, _SIZE, _DATE):
        return isinstance(value, str)
    if kind == _BOOL:
        return isinstance(value, bool)
    if kind == _STRS:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, dict)


def _size(table: dict[str, Any], key: str, where: str) -> int | None:
    """A size given as `key = "24GiB"` or `key_bytes = 25769803776`; None when neither is given."""
    if key in table and f"{key}_bytes" in table:
        raise CatalogError(f"{where}: give {key!r} or {key + '_bytes'!r}, not both")
    if f"{key}_bytes" in table:
        return table[f"{key}_bytes"]
    if key in table:
        try:
            return parse_bytes(table[key], unit_required=True)
        except UnitError as exc:
            raise CatalogError(f"{where}: key {key!r}: {exc}") from None
    return None


def _parse_gpu(table: dict[str, Any], where: str, known: dict[str, GPU]) -> GPU:
    if "id" in table:
        where = f"{where} ({table['id']!r})"
    _check_types(table, where, _GPU_KEYS, ())
    base: dict[str, Any] = {}
    if "based_on" in table:
        # A variant of a known GPU: inherit its datasheet, override what is given.
        try:
            parent = gpu_by_name(name_index(list(known.values())), table["based_on"])
        except CatalogError as exc:
            raise CatalogError(f"{where}: key 'based_on': {exc}") from None
        base = dataclasses.asdict(parent)
        base["peak_tflops"] = dict(parent.peak_tflops)
        if table.get("id", parent.id) != parent.id:  # a new GPU must not steal the parent's names
            base.update(aliases=(), nvml_names=(), name=table.get("id"), based_on=parent.based_on or parent.id)
    else:
        given_size = {k for k in ("memory", "l2") if k in table or f"{k}_bytes" in table}
        _check_required(table, where, tuple(k for k in _GPU_NEEDED if k not in given_size))
    _check_required(table, where, ("id",))
    memory = _size(table, "memory", where)
    l2 = _size(table, "l2", where)
    nvml_memory = _size(table, "nvml_memory", where)

    rates = dict(base.get("peak_tflops", {}))
    for p, v in table.get("peak_tflops", {}).items():
        if p not in PRECISIONS:
            raise CatalogError(f"{where}: key 'peak_tflops.{p}': unknown precision (use {', '.join(PRECISIONS)})")
        if not _has_type(v, _NUM):
            raise CatalogError(f"{where}: key 'peak_tflops.{p}' must be a number of TFLOPS, got {v!r}")
        rates[p] = float(v)

    fields = dict(base)
    if base and any(k in table and table[k] != base.get(k) for k in ("arch", "compute_capability")):
        fields["process_nm"] = None     # another chip: its architecture's node unless the table gives one
    fields.update({k: v for k, v in table.items() if k not in _NOT_FIELDS})
    # Figures from a file are cross-checked only where it says so (every shipped GPU does): a full table of yours
    # is as unverified as a variant of a shipped GPU (`*` in `gpus`).
    fields["verified"] = table.get("verified", False)
    fields["peak_tflops"] = {p: rates.get(p) for p in PRECISIONS}  # an omitted precision: the GPU lacks it
    if memory is not None:
        fields["memory_bytes"] = memory
    if l2 is not None:
        fields["l2_bytes"] = l2
    if nvml_memory is not None:
        fields["nvml_memory_bytes"] = nvml_memory
    elif memory is not None:  # a new memory size makes the inherited NVML figure wrong
        fields["nvml_memory_bytes"] = None
    fields["aliases"] = tuple(fields.get("aliases", ()))
    fields["nvml_names"] = tuple(fields.get("nvml_names", ()))
    for key in ("memory_bandwidth_gbs", "tdp_w", "nvlink_gbs", "process_nm"):
        if fields.get(key) is not None:
            fields[key] = float(fields[key])
    fields.setdefault("nvlink_gbs", None)
    gpu = GPU(**fields)
    problems = gpu_problems(gpu)
    if problems:
        key, what = problems[0]
        written_as = {"memory_bytes": "memory", "l2_bytes": "l2", "nvml_memory_bytes": "nvml_memory"}.get(key)
        if written_as in table:  # name the key as the file wrote it
            key = written_as
        raise CatalogError(f"{where}: key {key!r}: {what}")
    return gpu


def _parse_offer(table: dict[str, Any], where: str, index: dict[str, GPU], indicative: bool) -> tuple[Offer, GPU]:
    """The offer and its GPU (a MIG slice's name: the slice as a GPU). ``indicative``: the file's default, True for
    the shipped list only (whose dates are not checked against this machine's clock)."""
    table = _toml_dates_as_text(table)
    _check_types(table, where, _OFFER_KEYS, _OFFER_REQUIRED)
    if ("gpu" in table) == ("gpu_id" in table):
        raise CatalogError(f"{where}: give the GPU as key 'gpu' (any name of a known GPU)")
    gpu_name = table.get("gpu", table.get("gpu_id"))
    try:  # the one resolver every command uses: a family name lists its members, a MIG slice's name is the slice
        gpu = gpu_by_name(index, gpu_name, otherwise=" (add it as a [[gpu]] table)")
    except CatalogError as exc:
        raise CatalogError(f"{where}: key 'gpu': {exc}") from None
    offer = Offer(  # a provider the topology data names, as the catalog spells it ("AutoDL", "lambdalabs": live's rule)
        provider=provider_name(table["provider"]), gpu_id=gpu.id, count=table.get("count", 1),
        price_per_hour=float(table["price_per_hour"]),
        currency=currency_code(table["currency"]), spot=table.get("spot", False), source=table["source"],
        checked=table["checked"], indicative=table.get("indicative", indicative),
        region=table.get("region", "").strip(),
    )
    problems = offer_problems(offer, today=None if indicative else today_date())
    if problems:
        key, what = problems[0]
        raise CatalogError(f"{where}: key {key!r}: {what}")
    return offer, gpu
