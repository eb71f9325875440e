"""What a guard checkpoint leaves out of a partly frozen model, and how a resume checks it is still there.

A LoRA/QLoRA job (or any frozen backbone under a trained head) trains a sliver of its weights: an 8B LoRA's
adapters and their optimizer state are ~0.5 GB, its frozen base 16 GB. The training script loads that base on every
start, before ``resume()``, so saving it again at every checkpoint costs minutes of disk writes and keeps x its size
of disk for nothing. A checkpoint holds what training changes: the model's ``state_dict`` less its frozen parameters
(``requires_grad=False``: every name of a tied one, and what a module saves beside one under its name, such as
bitsandbytes' ``weight.absmax`` quant state), so buffers (BatchNorm's running statistics) stay in. In place of the
frozen entries it holds their fingerprint (``fingerprint``: shape, dtype, and the sha256 of a few fixed-position
elements' bytes, cheap for 70B and taken once a run), and a resume refuses a model whose frozen entries differ
(``refusal``): another base model, or a parameter frozen then and trained now (or the reverse).
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import torch

log = logging.getLogger(__name__)

# Elements of each frozen tensor whose bytes the fingerprint hashes: evenly spaced, the first and last included.
# Another base model (another fine-tune, another seed) differs in nearly every element; one element changed by
# hand may be missed, which is not the mistake this guards against.
SAMPLED_ELEMENTS = 256
SHOWN_NAMES = 3           # frozen entries named in a refusal, of each kind


def frozen_parameter_names(model: torch.nn.Module) -> frozenset[str]:
    """The ``state_dict`` names of ``model``'s parameters that do not train (``requires_grad=False``), every name
    of a tied one."""
    return frozenset(name for name, p in model.named_parameters(remove_duplicate=False) if not p.requires_grad)


def split_frozen(state: Mapping[str, Any], frozen_names: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``state`` (a ``state_dict``) as (what a checkpoint holds, what it leaves out): the entries of the parameters
    ``frozen_names`` and those saved under their names (``weight.absmax`` beside a frozen ``weight``) left out. The
    kept part keeps ``state``'s ``_metadata`` (the modules' versions ``load_state_dict`` hands them)."""
    frozen = set(frozen_names)
    kept: OrderedDict[str, Any] = OrderedDict()
    left_out: dict[str, Any] = {}
    for key, value in state.items():
        (left_out if _under_frozen(key, frozen) else kept)[key] = value
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        kept._metadata = metadata  # type: ignore[attr-defined]
    return kept, left_out


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
    """Name -> {"shape", "dtype", "sample_sha256"} of the left-out ``entries`` (plain types: a checkpoint loads them
    with ``weights_only``). The content is the sha256 of the bytes of ``SAMPLED_ELEMENTS`` fixed-position elements
    (any dtype: bitsandbytes' packed uint8, float8, bool), read back once a device, not once a tensor; None for a
    tensor without readable elements (meta, sparse, empty), and for a value that is no tensor."""
    samples = {name: _sampled_bytes(value) for name, value in entries.items() if isinstance(value, torch.Tensor)}
    on_host = _to_host(samples)
    return {name: {"shape": list(value.shape) if isinstance(value, torch.Tensor) else None,
                   "dtype": str(value.dtype) if isinstance(value, torch.Tensor) else type(value).__name__,
                   "sample_sha256": (hashlib.sha256(on_host[name].numpy().tobytes()).hexdigest()
                                     if on_host.get(name) is not None else None)}
            for name, value in entries.items()}


def _sampled_bytes(tensor: torch.Tensor) -> torch.Tensor | None:
    """The bytes (a uint8 tensor on ``tensor``'s device, no wait) of ``SAMPLED_ELEMENTS`` evenly spaced elements of
    ``tensor`` flattened; None where it has none to read."""
    if hasattr(tensor, "to_local"):         # a DTensor: no sharded state comes here (sharded saves are whole)
        return None
    t = tensor.detach()
    if type(t) is not torch.Tensor:
        t = t.as_subclass(torch.Tensor)     # a Parameter subclass (bitsandbytes' Params4bit): its plain data
    if t.is_meta or t.layout != torch.strided or t.numel() == 0:
        return None
    try:
        flat = t.reshape(-1)                 # a view of a contiguous tensor: no copy
        count = min(flat.numel(), SAMPLED_ELEMENTS)
        positions = torch.arange(count, device=flat.device) * (flat.numel() - 1) // max(count - 1, 1)
        return flat[positions].contiguous().view(torch.uint8).reshape(-1)
    except (RuntimeError, TypeError, NotImplementedError) as exc:   # a dtype torch cannot index or view as bytes
        log.debug("frozen tensor fingerprinted by shape and dtype only: %s", exc)
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


def refusal(saved: Mapping[str, Any], current: Mapping[str, Any], *, model_keys: Iterable[str],
            saved_keys: Iterable[str]) -> str:
    """One line (without the checkpoint's name) saying how the model's frozen entries, fingerprinted as ``current``,
    are not those the checkpoint left out (``saved``, its fingerprint); "" when they are. ``model_keys``: the model's
    ``state_dict`` names; ``saved_keys``: the model entries the checkpoint holds."""
    model_keys, saved_keys = set(model_keys), set(saved_keys)
    kinds = (
        ("differ from the checkpoint's", [f"{k} ({_difference(saved[k], current[k])})" for k in saved
                                          if k in current and _differs(saved[k], current[k])]),
        ("were frozen when saved and train now", [k for k in saved if k not in current and k in model_keys]),
        ("are frozen now but trained when saved", [k for k in current if k not in saved and k in saved_keys]),
        ("were frozen when saved and are not in the model", [k for k in saved if k not in model_keys]),
        ("are frozen now and not in the checkpoint", [k for k in current if k not in saved and k not in saved_keys]),
    )
    said = [f"{len(names)} {what} ({', '.join(names[:SHOWN_NAMES])}"
            f"{f', … {len(names) - SHOWN_NAMES} more' if len(names) > SHOWN_NAMES else ''})"
            for what, names in kinds if names]
    if not said:
        return ""
    return (f"the model's frozen weights are not those it was trained on: frozen entries {'; '.join(said)}; load the "
            "same base weights and freeze the same parameters before resume() (a checkpoint holds the trained "
            "parameters only; Guard(save_frozen=True) saves the frozen ones too)")


def _differs(saved: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    return any(saved.get(field) != current.get(field) for field in ("shape", "dtype", "sample_sha256"))


def _difference(saved: Mapping[str, Any], current: Mapping[str, Any]) -> str:
    """What differs of one frozen entry, in a few words."""
    if saved.get("shape") != current.get("shape"):
        return f"shape {saved.get('shape')} saved, {current.get('shape')} now"
    if saved.get("dtype") != current.get("dtype"):
        return f"dtype {saved.get('dtype')} saved, {current.get('dtype')} now"
    return "other values"


class FrozenWeights:
    """One model's rule: the state a checkpoint holds (``split``) and the fingerprint of what it leaves out, taken
    once while the frozen entries keep their names, shapes and dtypes (frozen weights do not change in a run;
    fingerprinting them at every save would read 70B of them each time)."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._fingerprint: dict[str, dict[str, Any]] = {}

    def split(self, model: torch.nn.Module) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """(``model``'s state less its frozen entries, their fingerprint); the fingerprint is empty and the state
        whole where nothing is frozen."""
        kept, left_out = split_frozen(model.state_dict(), frozen_parameter_names(model))
        return kept, self.fingerprint_of(left_out)

    def fingerprint_of(self, left_out: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        key = tuple((name, tuple(getattr(v, "shape", ())), str(getattr(v, "dtype", type(v).__name__)))
                    for name, v in left_out.items())
        if key != self._key:
            self._fingerprint, self._key = fingerprint(left_out), key
        return self._fingerprint

    def check(self, model: torch.nn.Module, saved: Mapping[str, Any], saved_keys: Iterable[str]) -> tuple[dict, str]:
        """(``model``'s state less its frozen entries: what the checkpoint must fit, the reason it refuses the
        model, "" if none) for a checkpoint whose fingerprint is ``saved`` and whose model entries are
        ``saved_keys``."""
        whole = model.state_dict()
        kept, left_out = split_frozen(whole, frozen_parameter_names(model))
        return kept, refusal(saved, self.fingerprint_of(left_out), model_keys=whole.keys(), saved_keys=saved_keys)
