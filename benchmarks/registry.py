"""Every benchmark script, what it writes and what it reads: the one list ``make bench`` runs.

Order matters: a script that writes a file another one reads (``time_accuracy`` writes the shipped
held-out error; ``kernel_laws --ship`` the shipped laws) runs first, so one pass leaves every results
file fresh. ``inputs`` are what a figure depends on besides the script itself and the harness (which
every benchmark has): helper modules, the data it reads and the gpuwise source it measures. A
script that cannot run on the CPU build machine is listed with the reason it is ``excluded``.
"""

from __future__ import annotations

from dataclasses import dataclass

HARNESS = ("benchmarks/harness.py",)
# The step-time model and what it reads: traces, GPUs, workloads, the shipped laws and calibration.
TIME_MODEL = ("src/gpuwise/runtime/", "src/gpuwise/trace/", "src/gpuwise/catalog/", "src/gpuwise/workload/")
# The public end-to-end cases and their cached traces (time_cases.py, time_traces.py).
TIME_CASES = ("benchmarks/time_cases.py", "benchmarks/time_traces.py", "benchmarks/baselines.py",
              "benchmarks/cache/", "shared:lambda_train.csv", "shared:gpu_datasheets.csv", "shared:timm/")
# Speed benchmarks refuse a loaded machine (benchmarks/machine.py).
MACHINE = "benchmarks/machine.py"
# The per-kernel fits: their shared settings, the laws' form and the shipped laws they keep or compare with.
KERNEL_FIT = "benchmarks/kernel_fit.py"
LAWS = ("src/gpuwise/runtime/laws.py", "src/gpuwise/runtime/kernel_laws.json")
# The GPU specs the modern kernel fits read from the catalog (kernel_fit.catalog_specs): the data file and
# the code that turns it into a GPU (the rest of catalog/ is queries, offers and validation).
CATALOG_SPECS = ("src/gpuwise/catalog/data/gpus.toml", "src/gpuwise/catalog/loader.py", "src/gpuwise/catalog/model.py")
VIDUR = "shared:kernels-modern/vidur_mlp_ops.csv.gz"
# The LLM closed form's training time on llm-foundry's MPT runs (llm_train_time.py; time_accuracy reads it too).
LLM_TRAIN = ("benchmarks/llm_train_time.py", "src/gpuwise/plan/", "src/gpuwise/memory/", "src/gpuwise/runtime/",
             "src/gpuwise/workload/", "src/gpuwise/catalog/", "shared:llm-train/")
MEMORY_MODEL = ("src/gpuwise/memory/", "src/gpuwise/trace/", "src/gpuwise/workload/", "src/gpuwise/catalog/")


@dataclass(frozen=True)
class Benchmark:
    name: str                       # the module: python -m benchmarks.<name>
    results: str                    # benchmarks/results/<results>.md and .json
    inputs: tuple[str, ...] = ()
    args: tuple[str, ...] = ()      # what make bench passes
    what: str = ""
    excluded: str = ""              # why make bench does not run it (needs a GPU, ...)
    minutes: float = 0.0            # one run on the 2-core build machine, roughly
    timed: str = ""                 # "measured", "results" or "estimate" (module docstring)

    @property
    def script(self) -> str:
        return f"benchmarks/{self.name.replace('.', '/')}.py"

    def all_inputs(self) -> tuple[str, ...]:
        return (self.script, *HARNESS, *self.inputs)


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("kernel_laws", "time_kernels",
              (KERNEL_FIT, *LAWS, "shared:kernels/", "shared:kernels-modern/neusight_test_kernels.csv.gz"),
              what="fp32 per-kernel laws: the fit on all six GPUs (kernel_laws.json with --ship) and leave-one-GPU-out "
                   "error", minutes=0.8, timed="measured"),
    Benchmark("tensor_laws", "time_tensor_kernels",
              (KERNEL_FIT, *LAWS, *CATALOG_SPECS, VIDUR, "shared:kernels-modern/mamf_max_achievable_matmul.csv"),
              what="tensor-core GEMM law and power level (kernel_laws.json's tensor part with --ship): vidur's fp16 "
                   "GEMMs and MAMF ceilings, GPU held out", minutes=0.3, timed="measured"),
    Benchmark("time_accuracy", "time", tuple(dict.fromkeys((*TIME_MODEL, *TIME_CASES, *LLM_TRAIN,
                                                            "benchmarks/multi_gpu_accuracy.py",
                                                            "shared:lambda_train_multi.csv",
                                                            "benchmarks/time_stack.py"))),
              what="end-to-end step time on the held-out sides, beside roofline and roofline / 0.75 "
                   "(writes time_accuracy.json)", minutes=1.5, timed="results"),
    Benchmark("time_stack", "time_stack", (*TIME_MODEL, *TIME_CASES),
              what="channels-last and torch.compile speed-ups, predicted vs measured", minutes=1, timed="estimate"),
    Benchmark("calibrate_accuracy", "calibrate", (*TIME_MODEL, *TIME_CASES, "src/gpuwise/calibrate/"),
              what="a user's calibration, leave-one-out within one stack", minutes=5.5, timed="results"),
    Benchmark("multi_gpu_accuracy", "multi_gpu", (*TIME_MODEL, *TIME_CASES, "shared:lambda_train_multi.csv"),
              what="data-parallel speed-ups on 2-8 GPUs, beside speed-up = N", minutes=1, timed="estimate"),
    Benchmark("collectives", "collectives",
              (KERNEL_FIT, "src/gpuwise/runtime/comm.py", "src/gpuwise/catalog/topology.py",
               "src/gpuwise/catalog/data/topology.toml", *CATALOG_SPECS, "shared:kernels-modern/vidur_network.csv.gz"),
              what="NCCL all-reduce times (runtime.comm.collective_s) against vidur's: link latencies and efficiencies "
                   "fitted on the A100 topologies, scored on the H100 ones", minutes=0.5, timed="estimate"),
    Benchmark("decode_layers", "decode_layers",
              (KERNEL_FIT, "src/gpuwise/runtime/", "src/gpuwise/workload/", "src/gpuwise/memory/llm.py", "src/gpuwise/catalog/",
               VIDUR, "shared:kernels-modern/vidur_model_shapes.csv"),
              what="one decode layer as runtime.llm.decode_step charges it (no attention, no all-reduce) against the "
                   "sum of vidur's fp16 operator kernels at 1-256 tokens; nothing fitted", minutes=0.2, timed="estimate"),
    Benchmark("lone_ops", "lone_ops", (*TIME_MODEL, "shared:kernels-modern/llmcompass_a100_real_hw.csv"),
              what="lone eager fp16 operators (matmul, softmax, layer norm, GELU) as gpuwise times them (host + kernel) "
                   "against LLMCompass's A100 wall-clock timings; nothing fitted", minutes=0.3, timed="estimate"),
    Benchmark("liger_speed", "liger_speed",
              (*TIME_MODEL, "benchmarks/op_memory.py", "shared:kernels-modern/liger_kernel_bench.csv.gz"),
              what="GPU time of plain-PyTorch norms, SwiGLU/GeGLU, cross-entropy and embedding (forward, backward, "
                   "full) against Liger's do_bench timings on 8 GPUs, 3 held out; the per-SM limit fitted on the seen GPUs "
                   "(--fit)", minutes=1.0,
              timed="estimate"),
    Benchmark("kernel_error_sources", "time_kernel_sources",
              ("benchmarks/kernel_laws.py", KERNEL_FIT, *LAWS, "shared:kernels/"),
              what="per-kernel error: a learned shape model with the GPU seen vs held out", minutes=22, timed="results"),
    Benchmark("memory_kernels", "time_memory_kernels", (KERNEL_FIT, *LAWS, *CATALOG_SPECS, VIDUR,
                                                        "shared:kernels-modern/vidur_model_shapes.csv"),
              what="the shipped streaming laws on vidur's fp16 norms, adds, activations and RoPE, GPU held out",
              minutes=0.2, timed="measured"),
    Benchmark("launch_floor", "time_launch", ("src/gpuwise/runtime/host.py", "shared:kernels/"),
              what="host cost of an eager call on GPU machines (NeuSight's lone-call floors) beside runtime/host.py's",
              minutes=0.1, timed="measured"),
    Benchmark("datasheet_ratio", "datasheet_ratio",
              ("src/gpuwise/runtime/rates.py", "src/gpuwise/catalog/", "shared:lambda_train.csv"),
              what="the datasheet speed ratio between two GPUs, against Lambda's throughputs", minutes=0.1, timed="measured"),
    Benchmark("memory_accuracy", "memory", (*MEMORY_MODEL, "benchmarks/measured/"),
              what="memory estimate vs GPU measurements (none yet), invariants, published MemTracker figures",
              minutes=1.7, timed="measured"),
    Benchmark("llm_accuracy", "llm",
              ("src/gpuwise/plan/", "src/gpuwise/memory/", "src/gpuwise/workload/", "src/gpuwise/catalog/",
               "shared:llm_memory_published.md"),
              what="closed-form LLM memory against LitGPT's measurements", minutes=0.1, timed="measured"),
    Benchmark("llm_train_time", "llm_train_time", LLM_TRAIN[1:],
              what="closed-form LLM training step time against llm-foundry's MPT tables (FSDP, 8-512 GPUs)",
              minutes=0.1, timed="measured"),
    Benchmark("op_memory", "op_memory",
              ("src/gpuwise/trace/", "src/gpuwise/memory/", "src/gpuwise/catalog/",
               "shared:kernels-modern/liger_kernel_bench.csv.gz"),
              what="per-op memory rules (trace + CUDA rules) against Liger's measured peaks of plain PyTorch ops",
              minutes=0.5, timed="measured"),
    Benchmark("advise_accuracy", "advise", ("src/gpuwise/advise/",),
              what="loss-curve forecasts on held-out tails; the noise-scale estimator", minutes=0.4, timed="measured"),
    Benchmark("host_overhead", "time_host", (MACHINE, "src/gpuwise/runtime/host.py"),
              what="eager PyTorch's host cost per call on this CPU (runtime/host.py's figures)", minutes=1, timed="estimate"),
    Benchmark("input_pipeline", "input_pipeline", (MACHINE, "src/gpuwise/runtime/input_costs.json"),
              what="JPEG decode + ImageNet transforms per image, one core", minutes=0.5, timed="estimate"),
    Benchmark("trace_speed", "trace", (MACHINE, "src/gpuwise/trace/", "src/gpuwise/workload/"),
              what="trace wall and CPU time of the issue-3 models", minutes=2, timed="results"),
    Benchmark("guard_save", "guard", (MACHINE, "src/gpuwise/guard/"), ("--repeats", "2,1"),
              what="how long a checkpoint blocks training, sync vs async", minutes=3, timed="estimate"),
    Benchmark("monitor_overhead", "monitor", (MACHINE, "src/gpuwise/monitor/", "src/gpuwise/runlog.py"), ("10",),
              what="sampler + run-log CPU cost at 10 Hz on 8 GPUs, log bytes per sample", minutes=0.5, timed="estimate"),
    Benchmark("cli_speed", "cli_speed", (MACHINE, "src/gpuwise/"), ("--repeats", "3"),
              what="first-question latency of the CLI as ratios (typo, cached, cold estimate; timm typo and cached timm estimate)", minutes=5, timed="estimate"),
    Benchmark("fit_time_calibration", "", excluded="fits the shipped calibration.json (a model change, made "
              "and committed by whoever changes the laws; its figures are time_accuracy's)"),
    Benchmark("gpu.measure", "", excluded="needs a CUDA GPU (writes benchmarks/measured/, which memory_accuracy reads)"),
    Benchmark("contributed.load", "", excluded="reads users' contributed rows (none committed); writes no results file"),
)


def by_name(name: str) -> Benchmark:
    for b in BENCHMARKS:
        if b.name == name:
            return b
    raise KeyError(f"no benchmark {name!r}; known: {', '.join(b.name for b in BENCHMARKS)}")
