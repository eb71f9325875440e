"""CUDA_VISIBLE_DEVICES read into entries, as CUDA reads them: the one home of its syntax.

Two parts read the variable, each with a policy of its own over these entries: the guard (``select_gpus`` chooses
among the GPUs a scheduler gave, and refuses an entry it cannot map, one line each) and the report (the GPUs of a
run log the job could see: the first entry naming no device ends the list, as CUDA ignores it and those after it).

The value is comma-separated; each entry, whitespace stripped, is a device index (in CUDA's order; a negative one
names no device), a GPU or MIG UUID or a prefix of one naming exactly one device (case aside), or the older MIG form
``MIG-GPU-<gpu uuid>/<gi>/<ci>`` (one MIG instance of that GPU). Pure functions over plain data: no NVML, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

LEGACY_MIG_PREFIX = "MIG-GPU-"     # "MIG-GPU-<gpu uuid>/<gi>/<ci>": older drivers' MIG UUIDs
MIG_UUID_PREFIX = "MIG-"
_INDEX = re.compile(r"-?[0-9]+")   # ASCII digits: str.isdigit() takes "²", which int() refuses


@dataclass(frozen=True)
class VisibleEntry:
    """One entry of CUDA_VISIBLE_DEVICES. At most one of ``index`` and ``uuid_prefix`` is set; neither: an empty
    entry (``"0,,1"``, a trailing comma), which names no device."""

    text: str                        # as written, whitespace stripped
    index: int | None = None         # a device index; a negative one names no device
    uuid_prefix: str | None = None   # a GPU or MIG UUID or a prefix of one; the older MIG form: its GPU's UUID
    legacy_mig: bool = False         # the older MIG form: one MIG instance of the GPU ``uuid_prefix`` names

    @property
    def names_mig(self) -> bool:
        """The entry names a MIG instance (by its UUID or in the older form), not a whole GPU."""
        return self.legacy_mig or is_mig_uuid(self.uuid_prefix or "")


def parse_visible_devices(value: str) -> tuple[VisibleEntry, ...]:
    """The entries of CUDA_VISIBLE_DEVICES=``value``, in order (an empty value: one empty entry)."""
    return tuple(parse_entry(text) for text in value.split(","))


def parse_entry(text: str) -> VisibleEntry:
    """One comma-separated entry of CUDA_VISIBLE_DEVICES (see the module's doc)."""
    text = text.strip()
    if _INDEX.fullmatch(text):
        return VisibleEntry(text, index=int(text))
    if not text:
        return VisibleEntry(text)
    if text.upper().startswith(LEGACY_MIG_PREFIX):
        return VisibleEntry(text, uuid_prefix=text[len(MIG_UUID_PREFIX):].split("/")[0], legacy_mig=True)
    return VisibleEntry(text, uuid_prefix=text)


def is_mig_uuid(uuid: str) -> bool:
    """``uuid`` is a MIG instance's (``MIG-…``), not a GPU's (``GPU-…``)."""
    return uuid.upper().startswith(MIG_UUID_PREFIX)


def matching_uuids(prefix: str, uuids: Iterable[str | None]) -> tuple[str, ...]:
    """The distinct UUIDs of ``uuids`` that begin with ``prefix``, case aside (a whole UUID begins with itself), as
    written in ``uuids``, in their order; none for an empty prefix. A missing UUID (None, "") matches nothing."""
    if not prefix:
        return ()
    found: dict[str, str] = {}
    for uuid in uuids:
        if uuid and uuid.lower().startswith(prefix.lower()):
            found.setdefault(uuid.lower(), uuid)
    return tuple(found.values())


def uuid_named(prefix: str, uuids: Iterable[str | None]) -> str | None:
    """The one UUID of ``uuids`` that ``prefix`` names (``matching_uuids``); None when it matches none or several,
    as CUDA takes a prefix only when it names one device."""
    matches = matching_uuids(prefix, uuids)
    return matches[0] if len(matches) == 1 else None
