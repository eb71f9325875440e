"""Per-kernel performance laws: the GPU time of one CUDA kernel from its shape and the GPU's specs.

Fitted on NeuSight's single-kernel timings (fp32, five GPUs; ``benchmarks/kernel_laws.py`` writes
``kernel_laws.json`` and scores each GPU with the laws fitted on the other four). Two families:

* **Tiled** (``linear``, ``bmm``, ``conv`` as an implicit GEMM): the output is cut into tm x tn
  tiles, one tile per SM per wave (split-K multiplies the tiles and divides K when too few tiles
  fill the SMs). The kernel takes the longer of its arithmetic, ``waves x 2 tm tn K' / (peak / SMs x
  u_max)``, and its operands, ``(tm + tn) K'`` elements per tile read through DRAM at the datasheet
  bandwidth, ``l2_reuse`` reads per DRAM byte (L2 serves the rest): a tile roofline, so small tiles are
  operand-bound on GPUs with little bandwidth per FLOP and more FLOP/s or bandwidth never makes a
  kernel slower (``l2_reuse`` 0: no operand term, where a fit runs it to its bound). The peak is the
  one the SMs issue (``PowerLevel``: issue width), and the work of all tiles at the rate the chip
  sustains under its power (``PowerLevel``: power per FLOP by process node) is a second roofline. The
  library's choice is taken as the fastest candidate. Tried and left out because the kernel data drove
  them to a bound: a tile-size and a reduction-length term, a Winograd gain for 3x3 convolutions (cuDNN's mix of
  algorithms averages out to direct-convolution FLOPs at ``u_max``), split-K for batched GEMMs and
  convolutions. Replaced (third session): a logistic utilisation in the GPU's bytes per FLOP,
  which extrapolated to 2-3% of peak on Ada cards and made a GPU slower for having more FLOP/s
  (benchmarks/README.md).
* **Streaming** (``elementwise``, ``norm``, ``softmax``): ``time = bytes / (bandwidth x u_max)``,
  bytes as the CUDA kernel moves them (see ``kernels.cuda_bytes``). (A term for small tensors that
  cannot fill the SMs was tried and left out: the data drove it to zero; the launch cost covers them.)

Every ``u_max`` is at most 1 and every other factor at most 1, so no law beats the datasheet peak
or bandwidth (``tests/runtime/test_kernel_laws.py`` checks it over the whole catalog). The data's fixed
cost of a lone timed call (launch + event timing) is not part of a law: step predictions add the
runtime's own per-kernel latency and host model.

The functions take floats (predictions) and numpy arrays (the fit) alike.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Mapping

import numpy as np

TILES = ((128, 128), (128, 64), (64, 128), (64, 64), (128, 32), (32, 128), (64, 32), (32, 32))
SPLIT_K = (1, 2, 4, 8, 16)
SPLIT_K_MIN_K = 256          # cuBLAS splits the reduction only when it is long
TILED = ("linear", "bmm", "conv")
STREAMING = ("elementwise", "norm", "softmax")


class LawError(ValueError):
    pass


@dataclass(frozen=True)
class TiledLaw:
    u_max: float              # utilisation of a full wave when arithmetic bounds it (<= 1)
    l2_reuse: float = 0.0     # operand bytes a tile reads per DRAM byte (>= 1); 0: no operand term
    split_k_eff: float = 0.0  # a split-K kernel's extra reduction pass (<= 1); 0: the class never splits
    wave_half: float = 0.0    # waves at which half of u is reached (ramp-up and tail of a short kernel)


@dataclass(frozen=True)
class StreamingLaw:
    u_max: float              # share of datasheet bandwidth of a large kernel (<= 1)


BASE_FP32_LANES_PER_SM = 64      # one FP32 datapath per SM sub-partition (Volta, Turing, GA100)
REFERENCE_PROCESS_NM = 7.0       # the node at which ``full_w_per_tflops`` is stated


@dataclass(frozen=True)
class PowerLevel:
    """The share of a datasheet peak a GPU sustains on dense kernels, from catalog specs.

    Two things hold a GPU under its datasheet peak (which is at boost clock, every lane busy):

    * **Issue width** (``second_datapath_share``, d). An SM with more than 64 FP32 lanes (GA10x, Ada,
      Hopper, Blackwell: 128) has a second FP32 datapath that shares its scheduler's issue slot (and on
      GA10x/Ada its lanes with INT32): a dense kernel's loads and address arithmetic take slots an FMA
      needed. Issued share = (64 + (lanes - 64) d) / lanes; 1 on a 64-lane SM.
    * **Power.** A card whose TDP is small for the FLOP/s it issues (a 70 W T4, a 72 W L4) lowers its
      clock under a sustained dense kernel. A FLOP's energy falls with the process node, so the input is
      W / (issued TFLOPS x (node / 7 nm)^``process_exponent``); ``share = min(1, (input / full)^exponent)``:
      at or above ``full`` watts per (7 nm-equivalent) TFLOPS the clock holds.

    ``exponent`` is at most 1, so more FLOP/s at the same power never lowers the sustained rate (peak x
    share grows with the peak) and more power never lowers it either. The defaults leave a term out.
    """

    full_w_per_tflops: float = 0.0   # 0: no power limit (every GPU holds its peak)
    exponent: float = 0.0
    process_exponent: float = 0.0    # 0: a FLOP costs the same energy on every node
    second_datapath_share: float = 1.0   # 1: a second FP32 datapath is as useful as the first


def issue_share(level: PowerLevel, lanes_per_sm):
    """The share of the datasheet rate an SM of ``lanes_per_sm`` FP32 lanes issues (floats or arrays)."""
    scalar = isinstance(lanes_per_sm, (int, float))
    lanes = max(lanes_per_sm, BASE_FP32_LANES_PER_SM) if scalar else np.maximum(lanes_per_sm, BASE_FP32_LANES_PER_SM)
    return (BASE_FP32_LANES_PER_SM + (lanes - BASE_FP32_LANES_PER_SM) * level.second_datapath_share) / lanes


def power_terms(level: PowerLevel, tdp_w, peak_flops_per_s, *, lanes_per_sm=BASE_FP32_LANES_PER_SM,
                process_nm=REFERENCE_PROCESS_NM):
    """(issued peak FLOP/s, power ratio) of a GPU under ``level`` (floats or arrays alike): the datasheet
    peak times the issue share, and W per (7 nm-equivalent) issued TFLOPS over the level's ``full``: the
    power share of a kernel that keeps every SM busy is ``min(1, ratio^exponent)``. The ratio is infinite
    (no power limit) where the level has none or the TDP is unknown (0); a GPU of unknown node (None) is
    taken at the reference node."""
    issued = peak_flops_per_s * issue_share(level, lanes_per_sm)
    scalar = all(isinstance(x, (int, float)) for x in (tdp_w, peak_flops_per_s, lanes_per_sm))
    if level.full_w_per_tflops <= 0 or level.exponent <= 0:
        return issued, (math.inf if scalar else np.full(np.shape(tdp_w), np.inf))
    node = REFERENCE_PROCESS_NM if process_nm is None else process_nm
    if scalar and isinstance(node, (int, float)):      # a prediction's path: plain Python, no numpy per call
        energy = (node / REFERENCE_PROCESS_NM) ** level.process_exponent
        return issued, (tdp_w / (issued / 1e12 * energy) / level.full_w_per_tflops if tdp_w > 0 else math.inf)
    energy = (np.asarray(node, dtype=float) / REFERENCE_PROCESS_NM) ** level.process_exponent
    with np.errstate(divide="ignore"):
        ratio = np.where(np.asarray(tdp_w) > 0,
                         np.asarray(tdp_w, dtype=float) / (issued / 1e12 * energy) / level.full_w_per_tflops, np.inf)
    return issued, (float(ratio) if np.ndim(ratio) == 0 else ratio)


def power_share(power_ratio, exponent: float):
    """The share of its issued rate a GPU sustains with every SM busy: ``min(1, ratio^exponent)``."""
    share = power_ratio ** exponent
    return min(1.0, share) if isinstance(share, float) else np.minimum(1.0, share)


def sustained_share(level: PowerLevel, tdp_w, peak_flops_per_s, *, lanes_per_sm=BASE_FP32_LANES_PER_SM,
                    process_nm=REFERENCE_PROCESS_NM):
    """The share of ``peak_flops_per_s`` a GPU of ``tdp_w`` sustains with every SM busy (floats or arrays
    alike): its issue share times its power share."""
    issued, ratio = power_terms(level, tdp_w, peak_flops_per_s, lanes_per_sm=lanes_per_sm, process_nm=process_nm)
    share = issued / peak_flops_per_s * power_share(ratio, level.exponent)
    return float(share) if np.ndim(share) == 0 else share


def gpu_power_terms(level: PowerLevel, gpu, peak_flops_per_s: float) -> tuple[float, float]:
    """``power_terms`` of a catalog GPU at ``peak_flops_per_s`` (its specs: TDP, lanes per SM, node)."""
    issued, ratio = power_terms(level, float(gpu.tdp_w or 0.0), peak_flops_per_s,
                                lanes_per_sm=float(gpu.fp32_lanes_per_sm), process_nm=gpu.process_nm)
    return float(issued), float(ratio)


@dataclass(frozen=True)
class Laws:
    tiled: Mapping[str, TiledLaw]
    streaming: Mapping[str, StreamingLaw]
    source: str = ""
    date: str = ""
    # The same laws measured on tensor-core (fp16/bf16) kernels, where the data has them (class -> law).
    tensor: Mapping[str, TiledLaw] = field(default_factory=dict)
    # Power levels: "cuda-core" (fp32 on CUDA cores) and "tensor" (tensor-core rates).
    levels: Mapping[str, PowerLevel] = field(default_factory=dict)
    # PyTorch's unvectorized elementwise kernels (a broadcast or a cast on load: one element a load,
    # ``runtime.kernels.unvectorized``) keep a fixed number of bytes in flight per SM, so by Little's law they
    # move at most this many bytes per SM per clock, whatever the DRAM could give
    # (``eager_streaming_limit_bytes_per_s``); 0: no limit.
    eager_bytes_per_sm_clock: float = 0.0

    def level(self, family: str) -> PowerLevel:
        return self.levels.get(family, PowerLevel())

    def to_dict(self) -> dict:
        return {"source": self.source, "date": self.date,
                "tiled": {k: vars(v) for k, v in self.tiled.items()},
                "streaming": {k: vars(v) for k, v in self.streaming.items()},
                "tensor": {k: vars(v) for k, v in self.tensor.items()},
                "levels": {k: vars(v) for k, v in self.levels.items()},
                "eager_bytes_per_sm_clock": self.eager_bytes_per_sm_clock}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Laws":
        try:
            return cls(tiled={k: TiledLaw(**v) for k, v in d["tiled"].items()},
                       streaming={k: StreamingLaw(**v) for k, v in d["streaming"].items()},
                       tensor={k: TiledLaw(**v) for k, v in d.get("tensor", {}).items()},
                       levels={k: PowerLevel(**v) for k, v in d.get("levels", {}).items()},
                       eager_bytes_per_sm_clock=float(d.get("eager_bytes_per_sm_clock", 0.0)),
                       source=str(d.get("source", "")), date=str(d.get("date", "")))
        except (KeyError, TypeError) as e:
            raise LawError(f"kernel_laws.json is malformed: {e!r}") from e


# Priors (used where kernel_laws.json is missing): a large SGEMM reaches ~85% of peak, a large
# elementwise kernel ~85% of bandwidth.
PRIOR = Laws(
    tiled={c: TiledLaw(0.85, 0.0, 0.8 if c == "linear" else 0.0) for c in TILED},
    streaming={c: StreamingLaw(0.85 if c == "elementwise" else 0.6) for c in STREAMING},
    source="priors (not fitted)",
)


@lru_cache(maxsize=1)
def load_laws() -> Laws:
    try:
        text = resources.files("gpuwise.runtime").joinpath("kernel_laws.json").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return PRIOR
    return Laws.from_dict(json.loads(text))


def _ceil(x):
    return -((-x) // 1)


def tiled_time_s(law: TiledLaw, batch, m, n, k, *, sm_count, peak_flops_per_s, bandwidth_bytes_per_s,
                 elem_bytes=4, power_ratio=math.inf, power_exponent=0.0):
    """Time of a (batch x m x n x k) GEMM-like kernel: the best tile and split-K choice.

    ``peak_flops_per_s`` is the peak of the rate the kernel runs at as the SMs issue it (``power_terms``:
    the datasheet's times the issue share), ``elem_bytes`` the size of its operands; ``power_ratio`` and
    ``power_exponent`` the GPU's power level (``power_terms``; infinite ratio: no limit). The power
    level is a roofline of its own: the work of all the tiles at the rate the whole chip sustains bounds
    the time, while a kernel of a few tiles (a few SMs' power) runs at its waves' boost-clock time; so
    more SMs, FLOP/s or power never make a kernel slower. The result is never below ``2 batch m n k / peak``.
    Plain numbers take Python's ``min`` (a prediction calls this for every GEMM of every op on every GPU),
    arrays ``np.minimum``: the same arithmetic either way.
    """
    scalar = all(isinstance(x, (int, float)) for x in
                 (batch, m, n, k, sm_count, peak_flops_per_s, bandwidth_bytes_per_s, elem_bytes, power_ratio))
    ceil = math.ceil if scalar else _ceil     # math.ceil gives an int: the same sums (exact below 2**53)
    rate = (peak_flops_per_s / sm_count) * law.u_max          # per SM when arithmetic bounds a wave
    # Operand elements per second the SMs together get from DRAM (L2 serving the rest of the reads).
    operand_rate = bandwidth_bytes_per_s * law.l2_reuse / elem_bytes if law.l2_reuse > 0 else None
    rows = {tm: ceil(m / tm) for tm in {tm for tm, _ in TILES}}
    cols = {tn: ceil(n / tn) for tn in {tn for _, tn in TILES}}
    splits = SPLIT_K if law.split_k_eff > 0 else (1,)
    big = max if scalar else np.maximum
    sustained = power_share(power_ratio, power_exponent) if power_exponent > 0 else 1.0
    limited = not scalar or sustained < 1.0      # a GPU that holds its clock needs no power roofline

    def candidates():
        for tm, tn in TILES:
            tiles = batch * rows[tm] * cols[tn]
            for split in splits:
                k_part = k / split
                waves = ceil(tiles * split / sm_count) + law.wave_half
                t = waves * 2.0 * tm * tn * k_part / rate
                if limited:     # a power roofline: the chip's sustained rate bounds the work of the tiles
                    t = big(t, tiles * split * 2.0 * tm * tn * k_part / (sm_count * rate * sustained))
                if operand_rate is not None:      # every tile reads (tm + tn) K' operand elements
                    t = big(t, tiles * split * (tm + tn) * k_part / operand_rate)
                if split > 1:
                    # cuBLAS splits only a long reduction (each part >= SPLIT_K_MIN_K / 4); the sums of
                    # the parts take an extra pass. (Comparisons as arithmetic: floats and arrays alike.)
                    t = t / law.split_k_eff + (k_part < SPLIT_K_MIN_K / 4) * 1e30
                yield t

    return min(candidates()) if scalar else functools.reduce(np.minimum, candidates())


def streaming_time_s(law: StreamingLaw, nbytes, *, bandwidth_bytes_per_s, limit_bytes_per_s=math.inf):
    """Time to move ``nbytes`` through DRAM in one kernel (never below bytes / bandwidth): the law's share
    of the bandwidth, or ``limit_bytes_per_s`` where the kernel itself cannot move more (a per-SM limit)."""
    return nbytes / np.minimum(bandwidth_bytes_per_s * law.u_max, limit_bytes_per_s)


def eager_streaming_limit_bytes_per_s(laws: Laws, sm_count, boost_clock_hz):
    """What PyTorch's unvectorized elementwise kernels can move on a GPU of ``sm_count`` SMs at ``boost_clock_hz``
    (floats or arrays): ``eager_bytes_per_sm_clock`` x SMs x clock; infinite where the laws set none."""
    if laws.eager_bytes_per_sm_clock <= 0 or not np.all(np.asarray(sm_count) > 0) \
            or not np.all(np.asarray(boost_clock_hz) > 0):
        return math.inf     # no limit set, or a GPU whose SMs or clock the catalog does not know
    return laws.eager_bytes_per_sm_clock * sm_count * boost_clock_hz
