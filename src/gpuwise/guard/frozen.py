"""What a guard checkpoint leaves out of a partly frozen model, and how a resume checks it is still there.

A LoRA/QLoRA job (or any frozen backbone under a trained head) trains a sliver of its weights: an 8B LoRA's
adapters and their optimizer state are ~0.5 GB, its frozen base 16 GB. The training script loads that base on every
start, before ``resume()``, so saving it again at every checkpoint costs minutes of disk writes and keeps x its size
of disk for nothing. But ``requires_grad=False`` does not mean "never changes": an EMA teacher (MoCo, BYOL, DINO,
mean teacher) is frozen and updated every step; a head trained, then frozen, holds trained values. So a checkpoint
leaves out only what the script can rebuild: an entry (a parameter, every name of a tied one, and what a module saves
beside one under its name, such as bitsandbytes' ``weight.absmax`` quant state) that is frozen now, has been frozen
for this whole run, has not changed since the run started (its fingerprint, ``fingerprint``: shape, dtype, and the
sha256 of a few fixed-position elements' bytes, taken at the start and again at every save) and was not in the
checkpoint this run resumed from (what a checkpoint carried stays carried). Buffers (BatchNorm's running statistics)
stay in. In place of the left-out entries a checkpoint holds their fingerprint, and a resume refuses a model whose
entries differ from it (``refusal``): another base model, or an entry missing.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import torch

log = logging.getLogger(__name__)

# Elements of each tensor whose bytes the fingerprint hashes: evenly spaced, the first and last included.
# Another base model (another fine-tune, another seed) differs in nearly every element, and so does an EMA or an
# optimizer step; one element changed by hand may be missed, which is not the mistake this guards against.
SAMPLED_ELEMENTS = 256
SHOWN_NAMES = 3           # left-out entries named in a refusal, of each kind


def frozen_parameter_names(model: torch.nn.Module) -> frozenset[str]:
    """The ``state_dict`` names of ``model``'s parameters that do not train (``requires_grad=False``), every name
    of a tied one."""
    return frozenset(name for name, p in model.named_parameters(remove_duplicate=False) if not p.requires_grad)


def trained_parameter_names(model: torch.nn.Module) -> frozenset[str]:
    """The ``state_dict`` names of ``model``'s parameters that train now, every name of a tied one."""
    return frozenset(name for name, p in model.named_parameters(remove_duplicate=False) if p.requires_grad)


def parameter_names(model: torch.nn.Module) -> frozenset[str]:
    """The ``state_dict`` names of all ``model``'s parameters, every name of a tied one."""
    return frozenset(name for name, _ in model.named_parameters(remove_duplicate=False))


def split_frozen(state: Mapping[str, Any], frozen_names: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``state`` (a ``state_dict``) as (the rest, the entries of the parameters ``frozen_names`` and those saved
    under their names: ``weight.absmax`` beside a frozen ``weight``)."""
    frozen = set(frozen_names)
    return split_entries(state, {key for key in state if _under_frozen(key, frozen)})


def split_entries(state: Mapping[str, Any], left_out: Collection[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``state`` (a ``state_dict``) as (what a checkpoint holds, the entries ``left_out``), in ``state``'s order. The
    kept part keeps ``state``'s ``_metadata`` (the modules' versions ``load_state_dict`` hands them)."""
    kept: OrderedDict[str, Any] = OrderedDict()
    out: dict[str, Any] = {}
    for key, value in state.items():
        (out if key in left_out else kept)[key] = value
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        kept._metadata = metadata  # type: ignore[attr-defined]
    return kept, out


def _under_frozen(key: str, frozen: set[str]) -> bool:
    """Whether ``key`` is a frozen parameter's, or an entry a module saves beside it under its name."""
    if key in frozen:
        return True
    dot = key.find(".")
    while dot != -1:
        if key[:dot] in frozen:
            return True
        dot = key.find(".", dot + 1)
    return False


def fingerprint(entries: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Name -> {"shape", "dtype", "sample_sha256"} of ``entries`` (plain types: a checkpoint loads them with
    ``weights_only``). The content is the sha256 of the bytes of ``SAMPLED_ELEMENTS`` fixed-position elements
    (any dtype: bitsandbytes' packed uint8, float8, bool), read back once a device, not once a tensor; None (unknown)
    for a tensor without readable elements (meta, sparse, empty), and for a value that is no tensor."""
    samples = {name: _sampled_bytes(value) for name, value in entries.items() if isinstance(value, torch.Tensor)}
    on_host = _to_host(samples)
    return {name: {"shape": list(value.shape) if isinstance(value, torch.Tensor) else None,
                   "dtype": str(value.dtype) if isinstance(value, torch.Tensor) else type(value).__name__,
                   "sample_sha256": (hashlib.sha256(on_host[name].numpy().tobytes()).hexdigest()
                                     if on_host.get(name) is not None else None)}
            for name, value in entries.items()}


def sampled_positions(numel: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The flat (row-major) positions of the elements the fingerprint reads of a tensor of ``numel`` elements:
    ``SAMPLED_ELEMENTS`` evenly spaced, the first and last included (all of a smaller one)."""
    count = min(numel, SAMPLED_ELEMENTS)
    return torch.arange(count, device=device) * (numel - 1) // max(count - 1, 1)


def _sampled_bytes(tensor: torch.Tensor) -> torch.Tensor | None:
    """The bytes (a uint8 tensor on ``tensor``'s device, no wait) of the elements at ``sampled_positions`` of
    ``tensor`` in row-major order, gathered where they lie (a non-contiguous tensor is not copied whole); None where
    it has none to read."""
    if hasattr(tensor, "to_local"):         # a DTensor: no sharded state comes here (sharded saves are whole)
        return None
    t = tensor.detach()
    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)     # a Parameter subclass (bitsandbytes' Params4bit): its plain data
    if t.is_meta or t.layout != torch.strided or t.numel() == 0:
        return None
    try:
        positions = sampled_positions(t.numel(), t.device)
        picked = t.reshape(1)[positions] if t.dim() == 0 else t[torch.unravel_index(positions, t.shape)]
        return picked.contiguous().view(torch.uint8).reshape(-1)
    except (RuntimeError, TypeError, NotImplementedError) as exc:   # a dtype torch cannot index or view as bytes
        log.debug("tensor fingerprinted by shape and dtype only: %s", exc)
        return None


def _to_host(samples: Mapping[str, torch.Tensor | None]) -> dict[str, torch.Tensor | None]:
    """``samples`` on the CPU: one copy (one wait) per device."""
    by_device: dict[torch.device, list[str]] = {}
    for name, sample in samples.items():
        if sample is not None:
            by_device.setdefault(sample.device, []).append(name)
    host: dict[str, torch.Tensor | None] = dict.fromkeys(samples)
    for names in by_device.values():
        pieces = [samples[name] for name in names]
        joined = torch.cat(pieces).cpu()
        host.update(zip(names, joined.split([p.numel() for p in pieces])))
    return host


def differs(saved: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether two fingerprints of an entry differ: in shape, in dtype, or in content where both contents are known
    (a meta tensor's unknown content is not a difference)."""
    if saved.get("shape") != current.get("shape") or saved.get("dtype") != current.get("dtype"):
        return True
    known = saved.get("sample_sha256") is not None and current.get("sample_sha256") is not None
    return known and saved["sample_sha256"] != current["sample_sha256"]


def refusal(saved: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """One line (without the checkpoint's name) saying how the model's entries a checkpoint left out, fingerprinted
    as ``current`` (those the model has), are not those the checkpoint fingerprinted (``saved``); "" when they are.
    Whether they train now does not matter: the values the checkpoint's training ran with are what counts."""
    kinds = (
        ("differ from the checkpoint's", [f"{k} ({_difference(saved[k], current[k])})" for k in saved
                                          if k in current and differs(saved[k], current[k])]),
        ("are not in the model", [k for k in saved if k not in current]),
    )
    said = [f"{len(names)} {what} ({', '.join(names[:SHOWN_NAMES])}"
            f"{f', … {len(names) - SHOWN_NAMES} more' if len(names) > SHOWN_NAMES else ''})"
            for what, names in kinds if names]
    if not said:
        return ""
    return (f"the model's frozen weights are not those it was trained on: entries the checkpoint left out "
            f"{'; '.join(said)}; load the same base weights before resume() (a checkpoint holds what training "
            "changed only; Guard(save_frozen=True) saves the frozen weights too)")


def _difference(saved: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """What differs of one entry, in a few words."""
    if saved.get("shape") != current.get("shape"):
        return f"shape {saved.get('shape')} saved, {current.get('shape')} now"
    if saved.get("dtype") != current.get("dtype"):
        return f"dtype {saved.get('dtype')} saved, {current.get('dtype')} now"
    return "other values"


def unchanged(baseline: Mapping[str, Mapping[str, Any]], current: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The names of ``current``'s fingerprints that ``baseline`` holds and that do not differ from it."""
    return {name for name, print_ in current.items() if name in baseline and not differs(baseline[name], print_)}


class FrozenWeights:
    """One Guard's rule for what of its model a checkpoint leaves out (``split``) and how a resume checks it
    (``check``). ``start`` takes the baseline: a fingerprint of every parameter's entries, at the run's start (the
    Guard's construction) and again when ``resume()`` has loaded a checkpoint. Each save fingerprints the frozen
    entries again (256 elements a tensor: ~0.1 s for 720 tensors on a 2-core CPU), never reusing an earlier save's."""

    def __init__(self) -> None:
        self._baseline: dict[str, dict[str, Any]] = {}
        self._ever_trained: set[str] = set()      # parameters that trained at some point of this Guard's life
        self._carried: frozenset[str] = frozenset()  # the model entries of the checkpoint this run resumed from

    def start(self, model: torch.nn.Module) -> None:
        """Take the baseline of ``model``'s parameters' entries as they are now."""
        self._ever_trained |= trained_parameter_names(model)
        self._baseline = fingerprint(split_frozen(model.state_dict(), parameter_names(model))[1])

    def carry(self, saved_keys: Iterable[str]) -> None:
        """The model entries of the checkpoint this run resumes from: saved again at every save (an EMA teacher a
        checkpoint held is held by the next run's, changed or not)."""
        self._carried = frozenset(saved_keys)

    def split(self, model: torch.nn.Module) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """(``model``'s state less the entries a checkpoint leaves out, their fingerprint): those of parameters
        frozen now and for this whole run, not carried, unchanged since the baseline. The fingerprint is empty and
        the state whole where none is left out."""
        self._ever_trained |= trained_parameter_names(model)
        state = model.state_dict()
        _, candidates = split_frozen(state, frozen_parameter_names(model) - self._ever_trained)
        current = fingerprint({k: v for k, v in candidates.items() if k not in self._carried})
        left_out = unchanged(self._baseline, current)
        kept, out = split_entries(state, left_out)
        return kept, {name: current[name] for name in out}

    def check(self, model: torch.nn.Module, saved: Mapping[str, Any], saved_keys: Iterable[str]
              ) -> tuple[dict[str, Any], str, list[str]]:
        """For a checkpoint whose fingerprint of what it left out is ``saved`` and whose model entries are
        ``saved_keys``: (``model``'s state less the left-out entries: what the checkpoint must fit, the reason it
        refuses the model, "" if none, the names it holds of parameters frozen now: progressive unfreezing)."""
        whole = model.state_dict()
        expected, left_out = split_entries(whole, set(saved))
        frozen_now = set(frozen_parameter_names(model))
        loaded_frozen = [k for k in saved_keys if k in whole and _under_frozen(k, frozen_now)]
        return expected, refusal(saved, fingerprint(left_out)), loaded_frozen
