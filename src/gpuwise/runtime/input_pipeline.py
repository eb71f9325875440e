"""The CPU side of feeding images: what ``--cpu-workers N`` delivers, and how many cores a rate needs.

One DataLoader worker is one process on one core running torchvision's ImageNet loader and transforms
(JPEG decode, random-resized crop and flip in training, resize and centre crop in evaluation, to tensor,
normalise). Its cost per image, ``fixed + per_pixel x side^2``, is measured on the dev machine's CPU by
``benchmarks/input_pipeline.py`` (``input_costs.json``): a rented machine's cores differ, so a rate from
``--cpu-workers`` is an estimate; ``--input-rate`` takes a measured one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from gpuwise.runtime.model import Note, is_note

DEFAULT_IMAGE_SIDE = 224
# Above this many cores of decoding per GPU a job on synthetic data gets a warning: the vCPUs a rented GPU
# usually comes with (8-12 on AutoDL-style and cloud machines: e.g. 96 vCPUs for 8 A100s).
CORES_PER_RENTED_GPU = 8
# Priors where the measured file is missing: PIL decode of a 500 x 375 JPEG and the transforms at 224 px.
_PRIOR = {"train": {"fixed_s": 4e-3, "per_pixel_s": 2.5e-8}, "eval": {"fixed_s": 5e-3, "per_pixel_s": 3e-8}}


@dataclass(frozen=True)
class DecodeCost:
    fixed_s: float        # decode of the source JPEG and per-image overheads, one core
    per_pixel_s: float    # crop/resize, to-tensor and normalise, per output pixel

    def per_image_s(self, side_px: int) -> float:
        return self.fixed_s + self.per_pixel_s * side_px * side_px


@lru_cache(maxsize=1)
def _costs() -> dict:
    try:
        return json.loads(resources.files("gpuwise.runtime").joinpath("input_costs.json").read_text())
    except (FileNotFoundError, ModuleNotFoundError):
        return {"fit": _PRIOR, "cpu": "priors (not measured)"}


def decode_cost(training: bool) -> DecodeCost:
    fit = _costs()["fit"]["train" if training else "eval"]
    return DecodeCost(float(fit["fixed_s"]), float(fit["per_pixel_s"]))


def measured_on() -> str:
    """The CPU the costs were measured on (said with a rate derived from them)."""
    return str(_costs().get("cpu", "unknown"))


def workers_rate(cpu_workers: int, side_px: int | None, training: bool, frames_per_sample: int = 1) -> float:
    """Samples/s that ``cpu_workers`` loader processes decode and transform: images, or clips of
    ``frames_per_sample`` decoded frames each (a video model's sample)."""
    return cpu_workers / (decode_cost(training).per_image_s(side_px or DEFAULT_IMAGE_SIDE) * frames_per_sample)


def cores_to_feed(samples_per_s: float, side_px: int | None, training: bool, frames_per_sample: int = 1) -> float:
    """Cores of JPEG decoding that keep ``samples_per_s`` samples/s (images, or clips of ``frames_per_sample``
    frames) coming."""
    return samples_per_s * frames_per_sample * decode_cost(training).per_image_s(side_px or DEFAULT_IMAGE_SIDE)


def _samples_words(samples_per_s: float, frames_per_sample: int) -> str:
    """"3,758 images/s", or for clips "3,758 clips/s (60,128 frames/s)": what the warning says is fed."""
    if frames_per_sample == 1:
        return f"{samples_per_s:,.0f} images/s"
    return (f"{samples_per_s:,.0f} clips/s of {frames_per_sample} frames ({samples_per_s * frames_per_sample:,.0f} "
            "frames/s)")


def source_images() -> str:
    """The JPEGs the costs were measured on, as the warning names them ("500x375" from input_costs.json)."""
    source = str(_costs().get("source_image", ""))
    return source.split()[0] if source[:1].isdigit() else "ImageNet's size"


def decoding_warning(samples_per_s: float, side_px: int | None, frames_per_sample: int = 1) -> Note | None:
    """What a vision training job on synthetic data would need from real JPEGs, when that is more decoding
    cores than a rented GPU usually comes with; None otherwise. It says what it assumes: the times are for
    synthetic data (no loader), the cores for ImageNet-size JPEGs decoded and cropped to the model's side
    (a model file's --image-size too), whose decode is most of the cost at a small side: images stored small,
    or not as JPEGs, cost less (--input-rate N takes the pipeline's measured rate). A video model's sample is a clip
    of ``frames_per_sample`` frames, each decoded as one JPEG."""
    side = side_px or DEFAULT_IMAGE_SIDE
    cores = cores_to_feed(samples_per_s, side, training=True, frames_per_sample=frames_per_sample)
    if round(cores) <= CORES_PER_RENTED_GPU:      # said as a whole number: "~8 cores" is no warning
        return None
    small = f"; images stored near {side} px, or not as JPEGs, cost less" if side < DEFAULT_IMAGE_SIDE else ""
    return Note(Note.DECODING_CORES,
                f"the times assume synthetic data: feeding {_samples_words(samples_per_s, frames_per_sample)} per GPU "
                f"from JPEGs would "
                f"take ~{cores:.0f} CPU cores of decoding (JPEGs of {source_images()} decoded to {side} px by "
                f"torchvision's transforms, measured on one core of {measured_on()}){small}; rented machines often "
                f"have {CORES_PER_RENTED_GPU} or so per GPU: --cpu-workers N or --input-rate N models the pipeline")


def is_decoding_warning(warning: str) -> bool:
    """Whether a warning is :func:`decoding_warning`'s (by its kind, not its words)."""
    return is_note(warning, Note.DECODING_CORES)
