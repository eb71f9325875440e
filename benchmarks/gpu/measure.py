#!/usr/bin/env python3
"""Ground truth on a real GPU: peak memory and step time of a suite of training/inference steps.

    python benchmarks/gpu/measure.py --out benchmarks/measured          # on a GPU machine
    python benchmarks/gpu/measure.py --dry-run --only resnet18 --out /tmp/m   # CPU, tiny sizes

Each workload runs in a fresh Python process (so torch.cuda.max_memory_* and NVML see only it):
the model is built with random weights straight on the device (torchvision builders, transformers
configs shipped in src/gpuwise/workload/configs: no download), with the inputs and loss gpuwise's
tracer uses (gpuwise.workload.spec_builders), then ``--warmup`` steps and ``--steps`` timed steps.
The suite covers the software stack too: transformers' attention implementation
(``attn_implementation``), torch.optim's foreach / fused / for-loop and ``zero_grad(set_to_none=False)``
(Workload.attention, optimizer_impl, keep_grads).
Recorded per workload: torch.cuda.max_memory_allocated / max_memory_reserved over all steps,
NVML memory of the process (and of the device, before and after), median step time. One JSON
file per GPU is written to --out, with GPU name, driver, CUDA and torch versions.

``--dry-run`` runs the same code path on the CPU with tiny inputs and one-layer transformers, and
makes no CUDA or NVML call: it is what tests/memory runs. A whole run is budgeted (``--budget-s``,
default 450 s) so that it ends within 8 minutes; workloads left over are listed as skipped, and
the JSON is rewritten after every workload so a killed run still leaves its data.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

# (id, Workload fields). Several batch sizes, fp32 and AMP, SGD and AdamW, train and infer.
SUITE: list[tuple[str, dict]] = [
    # Small-batch eager inference: the host-bound regime (issue 16's batch 1-16 target).
    ("resnet50-bs1-fp32-infer", dict(model="torchvision:resnet50", batch_size=1, optimizer="none", mode="infer")),
    ("resnet50-bs4-fp32-infer", dict(model="torchvision:resnet50", batch_size=4, optimizer="none", mode="infer")),
    ("resnet50-bs16-fp32-infer", dict(model="torchvision:resnet50", batch_size=16, optimizer="none", mode="infer")),
    ("resnet18-bs256-fp32-momentum", dict(model="torchvision:resnet18", batch_size=256, optimizer="momentum")),
    ("resnet18-bs256-ampfp16-sgd", dict(model="torchvision:resnet18", batch_size=256, precision="amp-fp16", optimizer="sgd")),
    ("resnet50-bs128-fp32-momentum", dict(model="torchvision:resnet50", batch_size=128, optimizer="momentum")),
    ("resnet50-bs128-ampfp16-momentum", dict(model="torchvision:resnet50", batch_size=128, precision="amp-fp16", optimizer="momentum")),
    ("resnet50-bs64-fp32-adamw", dict(model="torchvision:resnet50", batch_size=64, optimizer="adamw")),
    ("resnet50-bs64-fp32-infer", dict(model="torchvision:resnet50", batch_size=64, optimizer="none", mode="infer")),
    ("resnet101-bs64-ampfp16-momentum", dict(model="torchvision:resnet101", batch_size=64, precision="amp-fp16", optimizer="momentum")),
    ("vit_b_16-bs32-fp32-adamw", dict(model="torchvision:vit_b_16", batch_size=32, optimizer="adamw")),
    ("vit_b_16-bs64-ampbf16-adamw", dict(model="torchvision:vit_b_16", batch_size=64, precision="amp-bf16", optimizer="adamw")),
    ("efficientnet_b0-bs128-ampfp16-adamw", dict(model="torchvision:efficientnet_b0", batch_size=128, precision="amp-fp16", optimizer="adamw")),
    ("convnext_tiny-bs64-ampfp16-adamw", dict(model="torchvision:convnext_tiny", batch_size=64, precision="amp-fp16", optimizer="adamw")),
    ("mobilenet_v3_large-bs128-fp32-sgd", dict(model="torchvision:mobilenet_v3_large", batch_size=128, optimizer="sgd")),
    ("bert-base-s128-bs32-fp32-adamw", dict(model="hf:bert-base-uncased", batch_size=32, seq_len=128, optimizer="adamw")),
    ("bert-base-s128-bs32-ampfp16-adamw", dict(model="hf:bert-base-uncased", batch_size=32, seq_len=128, precision="amp-fp16", optimizer="adamw")),
    ("bert-base-s512-bs8-ampfp16-adamw", dict(model="hf:bert-base-uncased", batch_size=8, seq_len=512, precision="amp-fp16", optimizer="adamw")),
    ("bert-base-s128-bs64-ampfp16-infer", dict(model="hf:bert-base-uncased", batch_size=64, seq_len=128, precision="amp-fp16", optimizer="none", mode="infer")),
    ("bert-large-s128-bs16-ampfp16-adamw", dict(model="hf:bert-large-uncased", batch_size=16, seq_len=128, precision="amp-fp16", optimizer="adamw")),
    ("bert-large-s512-bs4-fp32-adamw", dict(model="hf:bert-large-uncased", batch_size=4, seq_len=512, optimizer="adamw")),
    ("gpt2-s1024-bs4-fp32-adamw", dict(model="hf:gpt2", batch_size=4, seq_len=1024, optimizer="adamw")),
    ("gpt2-s1024-bs8-ampbf16-adamw", dict(model="hf:gpt2", batch_size=8, seq_len=1024, precision="amp-bf16", optimizer="adamw")),
    ("gpt2-s1024-bs8-ampbf16-adamw-ckpt", dict(model="hf:gpt2", batch_size=8, seq_len=1024, precision="amp-bf16", optimizer="adamw", grad_checkpointing=True)),
    ("gpt2-medium-s1024-bs4-ampbf16-adamw", dict(model="hf:gpt2-medium", batch_size=4, seq_len=1024, precision="amp-bf16", optimizer="adamw")),
    ("llama-1b-s1024-bs4-ampbf16-adamw", dict(model="hf:meta-llama/Llama-3.2-1B", batch_size=4, seq_len=1024, precision="amp-bf16", optimizer="adamw")),
    ("llama-1b-s1024-bs4-bf16-adamw", dict(model="hf:meta-llama/Llama-3.2-1B", batch_size=4, seq_len=1024, precision="bf16", optimizer="adamw")),
    # The software stack (issue 15): attention implementation, optimizer implementation, keep-grads.
    ("bert-large-s512-bs1-fp32-adamw", dict(model="hf:bert-large-uncased", batch_size=1, seq_len=512, optimizer="adamw")),
    ("bert-large-s512-bs1-fp32-adamw-eager", dict(model="hf:bert-large-uncased", batch_size=1, seq_len=512, optimizer="adamw", attention="eager")),
    ("bert-large-s512-bs4-fp32-adamw-eager", dict(model="hf:bert-large-uncased", batch_size=4, seq_len=512, optimizer="adamw", attention="eager")),
    ("bert-large-s512-bs1-fp32-adamw-fused-eager", dict(model="hf:bert-large-uncased", batch_size=1, seq_len=512, optimizer="adamw", attention="eager", optimizer_impl="fused")),
    ("bert-large-s512-bs4-fp32-adamw-fused-eager", dict(model="hf:bert-large-uncased", batch_size=4, seq_len=512, optimizer="adamw", attention="eager", optimizer_impl="fused")),
    ("bert-base-s128-bs32-ampfp16-adamw-fused", dict(model="hf:bert-base-uncased", batch_size=32, seq_len=128, precision="amp-fp16", optimizer="adamw", optimizer_impl="fused")),
    ("bert-base-s128-bs32-ampfp16-adamw-forloop", dict(model="hf:bert-base-uncased", batch_size=32, seq_len=128, precision="amp-fp16", optimizer="adamw", optimizer_impl="for-loop")),
    ("bert-base-s128-bs32-ampfp16-adamw-keepgrads", dict(model="hf:bert-base-uncased", batch_size=32, seq_len=128, precision="amp-fp16", optimizer="adamw", keep_grads=True)),
    ("gpt2-s1024-bs8-ampbf16-adamw-eager", dict(model="hf:gpt2", batch_size=8, seq_len=1024, precision="amp-bf16", optimizer="adamw", attention="eager")),
    # Issue 26: the V100 table's stack (HF Trainer: eager, per-parameter AdamW, gradients kept), fp32 and AMP at
    # batch 1 and 4: batch 4 - batch 1 separates a 1-byte dropout mask from a dtype-sized one (1.05 GiB apart in
    # fp32), and fp32 - AMP checks what AMP keeps.
    *[(f"bert-large-s512-bs{b}-{p.replace('-', '')}-adamw-forloop-eager-keepgrads",
       dict(model="hf:bert-large-uncased", batch_size=b, seq_len=512, precision=p, optimizer="adamw",
            attention="eager", optimizer_impl="for-loop", keep_grads=True))
      for p in ("fp32", "amp-fp16") for b in (1, 4)],
]
# transformers' attn_implementation for Workload.attention (flash2 needs the flash-attn package).
ATTN_IMPLEMENTATION = {"sdpa": "sdpa", "eager": "eager", "flash2": "flash_attention_2"}
OPTIMIZER_IMPL_FLAGS = {"foreach": {"foreach": True}, "fused": {"fused": True}, "for-loop": {"foreach": False}}

DRY_BATCH, DRY_SEQ, DRY_IMAGE = 2, 16, 64


# ------------------------------------------------------------------------------------ worker
def _build(fields: dict, dry_run: bool, device):
    """The model on ``device`` with random weights, a batch maker and a loss, as the tracer sees them."""
    import torch

    from gpuwise.workload.model import Workload
    from gpuwise.workload.spec_builders import build as build_meta
    from gpuwise.workload.specs import resolve_model_spec

    workload = Workload(**fields)
    spec = resolve_model_spec(workload.model)
    built = build_meta(spec, workload)             # inputs and loss; its meta module is dropped
    with torch.device(device):
        if spec.source == "torchvision":
            import torchvision.models as tvm

            kwargs = {"weights": None}
            if spec.target.startswith("vit_"):
                kwargs["image_size"] = workload.image_size or spec.default_image_size()
            module = tvm.get_model(spec.target, **kwargs)
        else:
            import transformers

            cfg = dict(spec.hf_config)
            model_type = cfg.pop("model_type")
            for key in ("_name_or_path", "transformers_version", "architectures", "auto_map"):
                cfg.pop(key, None)
            if dry_run:
                cfg.update(_tiny_config(cfg))
            config = transformers.AutoConfig.for_model(model_type, **cfg)
            auto = type(built.module)
            transformers.logging.set_verbosity_error()
            module = auto._from_config(config, attn_implementation=ATTN_IMPLEMENTATION[workload.attention])
    if workload.grad_checkpointing and hasattr(module, "gradient_checkpointing_enable"):
        module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return workload, module, built


def _tiny_config(cfg: dict) -> dict:
    """One narrow layer and a small vocabulary: the same code path, CPU-sized."""
    tiny = {}
    for key, value in (("num_hidden_layers", 1), ("n_layer", 1), ("num_layers", 1), ("hidden_size", 64),
                       ("n_embd", 64), ("d_model", 64), ("num_attention_heads", 2), ("n_head", 2),
                       ("intermediate_size", 128), ("n_inner", 128), ("head_dim", 32)):
        if key in cfg:
            tiny[key] = value
    if "num_key_value_heads" in cfg:
        tiny["num_key_value_heads"] = 2 if cfg["num_key_value_heads"] == cfg.get("num_attention_heads") else 1
    if "vocab_size" in cfg:
        tiny["vocab_size"] = min(cfg["vocab_size"], 1024)
    return tiny


def _batch(built, training: bool, device, dry_run_vocab: int | None, float_dtype=None):
    import torch

    with torch.device(device):
        args, kwargs = built.make_batch(training)

    def fix(x):
        # make_batch leaves floats uninitialised; NaNs would make GradScaler skip the step (and
        # the optimizer state would never be allocated).
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return torch.randn_like(x, dtype=float_dtype or x.dtype)   # pure fp16/bf16: inputs too
        if isinstance(x, torch.Tensor) and dry_run_vocab and x.dtype == torch.long and x.dim() >= 2:
            return x.remainder(dry_run_vocab)
        return x

    return tuple(fix(a) for a in args), {k: fix(v) for k, v in kwargs.items()}


def _optimizer(name: str, params, impl: str = "foreach"):
    import torch

    flags = OPTIMIZER_IMPL_FLAGS[impl]
    if name == "none":
        return None
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, **flags)
    if name == "momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **flags)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-4, **flags)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, **flags)
    raise SystemExit(f"measure.py: optimizer {name!r} is not in the measured suite")


def run_worker(fields: dict, dry_run: bool, warmup: int, steps: int) -> dict:
    import torch

    device = "cpu" if dry_run else "cuda"
    if dry_run:
        fields = dict(fields, batch_size=min(fields.get("batch_size", 2), DRY_BATCH))
        if fields["model"].startswith("hf:"):
            fields["seq_len"] = DRY_SEQ
        else:
            fields["image_size"] = DRY_IMAGE
    torch.manual_seed(0)
    precision = fields.get("precision", "fp32")
    if not dry_run:
        # gpuwise's "fp32": PyTorch defaults (TF32 off for matmul, on for cuDNN convolutions).
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = True
    workload, module, built = _build(fields, dry_run, device)
    vocab = 1024 if dry_run else None
    if precision in ("fp16", "bf16"):
        module = module.to(torch.float16 if precision == "fp16" else torch.bfloat16)
    if workload.channels_last:
        module = module.to(memory_format=torch.channels_last)
    training = workload.mode == "train"
    module.train(training)
    opt = (_optimizer(workload.optimizer, [p for p in module.parameters() if p.requires_grad], workload.optimizer_impl)
           if training else None)
    amp_dtype = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(precision)
    scaler = torch.amp.GradScaler(device, enabled=precision == "amp-fp16" and not dry_run)
    autocast_device = "cpu" if dry_run else "cuda"

    pure_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)

    def step() -> None:
        args, kwargs = _batch(built, training, device, vocab, pure_dtype)
        labels = kwargs.pop("_labels", None)
        batch = (args, dict(kwargs, _labels=labels) if labels is not None else kwargs)
        if workload.channels_last and args and isinstance(args[0], torch.Tensor) and args[0].dim() == 4:
            args = (args[0].contiguous(memory_format=torch.channels_last), *args[1:])
        with torch.autocast(autocast_device, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            if not training:
                with torch.no_grad():
                    module(*args, **kwargs)
                return
            out = module(*args, **kwargs)
            loss = built.loss_fn(out, batch) if built.loss_fn is not None else out.loss
        scaler.scale(loss).backward()
        if opt is not None:
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=not workload.keep_grads)
        else:
            module.zero_grad(set_to_none=not workload.keep_grads)

    def sync() -> None:
        if not dry_run:
            torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    result = {
        "median_step_time_s": statistics.median(times) if times else None,
        "step_times_s": times,
        "param_count": sum(p.numel() for p in module.parameters()),
        "dry_run": dry_run,
    }
    if not dry_run:
        stats = torch.cuda.memory_stats()
        result.update(
            max_memory_allocated_bytes=torch.cuda.max_memory_allocated(),
            max_memory_reserved_bytes=torch.cuda.max_memory_reserved(),
            num_alloc_retries=stats.get("num_alloc_retries", 0),
            num_ooms=stats.get("num_ooms", 0),
            nvml_process_bytes=_nvml_process_bytes(os.getpid()),
            nvml_device_used_bytes=_nvml_device_used_bytes(),
        )
    return result


# ------------------------------------------------------------------------------- host probe
HOST_PROBE_CALLS = 2000


def host_probe(dry_run: bool) -> dict:
    """Eager PyTorch's host cost per call on this machine, in microseconds (runtime/host.py's figures).

    Each module runs ``HOST_PROBE_CALLS`` times on a one-image tensor with no synchronisation in
    between: the GPU finishes each tiny kernel before the host issues the next, so the wall time per
    call is the host's issue cost (Python, dispatcher, cuDNN/cuBLAS set-up, CUDA launch).
    """
    import torch

    device = "cpu" if dry_run else "cuda"
    calls = 50 if dry_run else HOST_PROBE_CALLS
    x = torch.randn(1, 64, 8, 8, device=device)
    v = torch.randn(1, 64, device=device)
    q = torch.randn(1, 4, 16, 32, device=device)
    probes = {
        "conv (nn.Conv2d 3x3)": (torch.nn.Conv2d(64, 64, 3, padding=1).to(device), x),
        "norm (nn.BatchNorm2d, eval)": (torch.nn.BatchNorm2d(64).to(device).eval(), x),
        "activation (nn.ReLU)": (torch.nn.ReLU(), x),
        "matmul (nn.Linear)": (torch.nn.Linear(64, 64).to(device), v),
        "attention (F.scaled_dot_product_attention)": (
            lambda t: torch.nn.functional.scaled_dot_product_attention(t, t, t), q),
        "bare aten op (Tensor.add)": (lambda t: t.add(1.0), x),
    }
    out = {}
    with torch.no_grad():
        for name, (fn, arg) in probes.items():
            for _ in range(20):
                fn(arg)
            if not dry_run:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(arg)
            if not dry_run:
                torch.cuda.synchronize()
            out[name] = round((time.perf_counter() - t0) / calls * 1e6, 2)
    return out


# ------------------------------------------------------------------------------------ NVML
def _nvml_handle():
    import pynvml

    pynvml.nvmlInit()
    index = int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0] or 0)
    return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)


def _nvml_process_bytes(pid: int) -> int | None:
    try:
        pynvml, handle = _nvml_handle()
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == pid and proc.usedGpuMemory is not None:
                return int(proc.usedGpuMemory)
    except Exception:  # no NVML, or the driver hides per-process memory (containers)
        return None
    return None


def _nvml_device_used_bytes() -> int | None:
    try:
        pynvml, handle = _nvml_handle()
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:
        return None


def gpu_info(dry_run: bool) -> dict:
    import torch

    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "host": platform.node(), "dry_run": dry_run}
    if dry_run:
        info.update(name="cpu (dry run)", driver=None, memory_bytes=None)
        return info
    props = torch.cuda.get_device_properties(0)
    info.update(name=props.name, memory_bytes=props.total_memory, compute_capability=f"{props.major}.{props.minor}",
                cudnn=torch.backends.cudnn.version())
    try:
        pynvml, handle = _nvml_handle()
        info["driver"] = pynvml.nvmlSystemGetDriverVersion()
        info["nvml_name"] = pynvml.nvmlDeviceGetName(handle)
        info["nvml_memory_bytes"] = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
    except Exception as exc:
        info["driver"] = None
        info["nvml_error"] = str(exc)
    return info


# ------------------------------------------------------------------------------------ driver
def _slug(name: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in name.lower()).split()
    return "-".join(words) or "gpu"


def run_suite(args) -> Path:
    suite = [(i, f) for i, f in SUITE if not args.only or any(o in i for o in args.only.split(","))]
    if not suite:
        raise SystemExit(f"measure.py: --only {args.only!r} matches no workload")
    start = time.monotonic()
    # On a GPU the versions are read in a child, so this process never holds a CUDA context.
    info = gpu_info(True) if args.dry_run else json.loads(_child([sys.executable, __file__, "--info"], timeout_s=120))
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{_slug(info['name'])}.json"
    doc = {"gpu": info, "date": _dt.date.today().isoformat(), "warmup_steps": args.warmup,
           "timed_steps": args.steps, "results": []}
    try:
        probe_cmd = [sys.executable, __file__, "--host-probe"] + (["--dry-run"] if args.dry_run else [])
        doc["host_probe_us"] = json.loads(_child(probe_cmd, timeout_s=120))
    except _ChildError as exc:
        doc["host_probe_us"] = {"error": str(exc)[-400:]}
    path.write_text(json.dumps(doc, indent=1))
    for wid, fields in suite:
        row = {"id": wid, "workload": fields}
        remaining_s = args.budget_s - (time.monotonic() - start)
        if remaining_s < 20:
            row["status"] = "skipped: time budget spent"
        else:
            before = None if args.dry_run else _nvml_device_used_bytes()
            cmd = [sys.executable, __file__, "--worker", json.dumps(fields), "--warmup", str(args.warmup),
                   "--steps", str(args.steps)] + (["--dry-run"] if args.dry_run else [])
            t0 = time.monotonic()
            try:
                # never past the budget: the whole run must end within 8 minutes
                row.update(json.loads(_child(cmd, timeout_s=min(args.workload_timeout_s, remaining_s))))
                row["status"] = "ok"
            except _ChildError as exc:
                row["status"] = "oom" if "out of memory" in str(exc).lower() else "error"
                row["error"] = str(exc)[-800:]
            row["wall_s"] = round(time.monotonic() - t0, 2)
            row["nvml_device_used_before_bytes"] = before
        doc["results"].append(row)
        path.write_text(json.dumps(doc, indent=1))
        print(f"{wid:45s} {row['status']:8s} {row.get('wall_s', 0):6.1f}s", flush=True)
    return path


class _ChildError(RuntimeError):
    pass


def _child(cmd: list[str], timeout_s: float) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise _ChildError(f"timed out after {timeout_s:.0f}s") from None
    if proc.returncode != 0:
        raise _ChildError(proc.stderr.strip() or f"exit {proc.returncode}")
    return proc.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(REPO / "benchmarks" / "measured"), help="folder for <gpu>.json")
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes, no CUDA/NVML calls")
    p.add_argument("--only", default="", help="comma-separated substrings of workload ids")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--budget-s", type=float, default=450.0,
                   help="wall seconds for all workloads together; the rest are skipped")
    p.add_argument("--workload-timeout-s", type=float, default=120.0)
    p.add_argument("--list", action="store_true", help="print the suite and exit")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--info", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--host-probe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.list:
        for wid, fields in SUITE:
            print(wid, json.dumps(fields))
        return 0
    if args.info:
        print(json.dumps(gpu_info(args.dry_run)))
        return 0
    if args.host_probe:
        print(json.dumps(host_probe(args.dry_run)))
        return 0
    if args.worker:
        print(json.dumps(run_worker(json.loads(args.worker), args.dry_run, args.warmup, args.steps)))
        return 0
    path = run_suite(args)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
