"""A SkyServe service for a serving plan (https://docs.skypilot.co/en/latest/serving/service-yaml-spec.html):
``sky serve up`` starts the plan's replicas and a load balancer in front of them.

``service`` probes each replica at vLLM's ``/health`` (200 once its engine serves), allowing a new replica the
time to download and load its checkpoint before a failed probe counts (``readiness_initial_delay_s``), and keeps
the plan's replica count (``replicas``: the fewest that carry the request rate); ``resources`` are one replica's
machine as a training task's are one node's (``skypilot_resources``: the accelerator and its count, spot,
``infra``, the disk for the model: ``LaunchPlan.disk``) and open the port vLLM listens on, which SkyServe's load
balancer forwards to; ``setup`` installs the vLLM series the plan models (``VLLM_VERSION``); ``run`` is the
``vllm serve`` line the plan is priced with (``vllm_serve_line``).
``secrets`` passes a Hugging Face token (``HF_TOKEN``, empty unless ``sky serve up --secret HF_TOKEN``) for a
gated model's download; a local checkpoint (``LaunchPlan.model_dir``) is uploaded instead (``file_mounts``, to
``REMOTE_MODEL_DIR``, which ``run`` serves). Neither gpuwise nor torchrun runs on the replicas.
"""

from __future__ import annotations

import math
import shlex

from gpuwise.launch.plan import LaunchPlan
from gpuwise.launch.server import REMOTE_MODEL_DIR, VLLM_PORT, VLLM_READINESS_PATH, VLLM_REQUIREMENT
from gpuwise.launch.skypilot import dump_task, region_note, skypilot_resources
from gpuwise.workload.model import VLLM_VERSION

HF_TOKEN = "HF_TOKEN"        # what huggingface_hub (and so vLLM's download) reads the token from; empty: none
SERVE_UP = "sky serve up"    # SkyPilot's command that starts a service

# SkyServe tears down a replica whose probe has not passed this long after it started (sky/serve/constants.py
# DEFAULT_INITIAL_DELAY_SECONDS, SkyPilot 0.14): a service never asks for less
SKYSERVE_DEFAULT_INITIAL_DELAY_S = 1200
# An assumption without a measurement: a cloud machine downloads from the Hugging Face Hub at 100 MB/s (800 Mbit/s),
# below what the disk it writes to takes (DISK_READ_BYTES_PER_S)
DOWNLOAD_BYTES_PER_S = 100 * 10**6
# vLLM loads the weights from the replica's disk: SkyPilot's default disk tier (medium) on AWS is gp3 at 3500 IOPS
# and 3500 // 16 = 218 MiB/s (sky/clouds/aws.py ``_get_disk_specs``); PCIe to the GPUs (~25 GB/s a link) is faster
DISK_READ_BYTES_PER_S = (3500 // 16) * 2**20
DISK_READ_CLOUD = "aws"     # the SkyPilot cloud whose default disk DISK_READ_BYTES_PER_S is; elsewhere it is assumed


def readiness_initial_delay_s(model_bytes: int, *, downloaded: bool = True) -> int:
    """Seconds SkyServe lets a new replica fail its readiness probe (``readiness_probe.initial_delay_seconds``):
    the download of its ``model_bytes`` (``DOWNLOAD_BYTES_PER_S``; none where ``downloaded`` is False: a local
    checkpoint is uploaded before setup) and their load from the disk (``DISK_READ_BYTES_PER_S``), rounded up;
    never below SkyServe's default (``SKYSERVE_DEFAULT_INITIAL_DELAY_S``)."""
    start_s = (model_bytes / DOWNLOAD_BYTES_PER_S if downloaded else 0.0) + model_bytes / DISK_READ_BYTES_PER_S
    return max(SKYSERVE_DEFAULT_INITIAL_DELAY_S, math.ceil(start_s))


def _initial_delay_s(plan: LaunchPlan) -> int:
    """``readiness_initial_delay_s`` of the plan's model (``LaunchPlan.disk``; not known: SkyServe's default),
    downloaded unless the plan uploads a local checkpoint (``LaunchPlan.model_dir``)."""
    return readiness_initial_delay_s(plan.disk.model_bytes if plan.disk is not None else 0,
                                     downloaded=plan.model_dir is None)


def skyserve_task(plan: LaunchPlan, *, name: str | None = None) -> dict:
    """The service as a task mapping, in SkyPilot's YAML schema: ``plan.command`` (a ``vllm serve`` line that
    listens on ``VLLM_PORT``) on each of ``plan.replicas``; the model downloaded with ``HF_TOKEN``, or a local
    checkpoint's folder uploaded (``_model_source``)."""
    probe = {"path": VLLM_READINESS_PATH, "initial_delay_seconds": _initial_delay_s(plan)}
    return {
        "name": name or f"gpuwise-serve-{plan.gpu.id}-x{plan.count}",
        "service": {"readiness_probe": probe, "replicas": plan.replicas},
        "resources": {**skypilot_resources(plan), "ports": VLLM_PORT},
        **_model_source(plan),
        "setup": f"pip install {shlex.quote(VLLM_REQUIREMENT)}",
        "run": shlex.join(plan.command.process_argv) + "\n",     # a literal block, as a training task's run
    }


def _model_source(plan: LaunchPlan) -> dict:
    """Where a replica gets the model: a local checkpoint's folder uploaded to ``REMOTE_MODEL_DIR`` (``file_mounts``:
    remote path -> local path), else the Hub, with a token for a gated model (``secrets``)."""
    if plan.model_dir is not None:
        return {"file_mounts": {REMOTE_MODEL_DIR: str(plan.model_dir)}}
    return {"secrets": {HF_TOKEN: ""}}


def _model_note(plan: LaunchPlan) -> str:
    """Where a replica gets the model, in words (``_model_source``)."""
    if plan.model_dir is not None:
        return (f"{SERVE_UP} uploads {plan.model_dir} to {REMOTE_MODEL_DIR} on each replica (file_mounts), and vLLM "
                f"serves it from there")
    return (f"vLLM downloads the model on each replica; a gated one downloads only with your Hugging Face token: "
            f"{SERVE_UP} --secret {HF_TOKEN} <this file> (from ${HF_TOKEN} here)")


def render_skyserve(plan: LaunchPlan) -> str:
    """What ``gpuwise recommend --emit skypilot`` prints for a server: the notes as comments, then the YAML."""
    replicas = f"{plan.replicas} replica{'s' if plan.replicas > 1 else ''} of "
    head = [f"# {replicas}{plan.count}x {plan.gpu.name} from {plan.provider}: {SERVE_UP} <this file>",
            *plan.priced_lines]
    head += [f"# note: {n}" for n in plan.notes]
    head.append(f"# note: {SERVE_UP} starts the replicas and a load balancer; `sky serve status` names its "
                f"endpoint, which forwards to vLLM's OpenAI-compatible API on port {VLLM_PORT} (/v1/completions)")
    head.append(f"# note: {_model_note(plan)}")
    head.append(f"# note: {_start_note(plan)}")
    if (region := region_note(plan)) is not None:
        head.append(f"# note: {region}")
    return "\n".join(head) + "\n" + dump_task(skyserve_task(plan))


def _download_words(plan: LaunchPlan) -> str:
    """The download part of the start note: none for an uploaded local checkpoint."""
    if plan.model_dir is not None:
        return "the local checkpoint uploaded before setup, then "
    return f"the model's download at an assumed {DOWNLOAD_BYTES_PER_S / 10**6:g} MB/s and "


def disk_read_words(cloud: str | None, provider: str) -> str:
    """The disk read speed a replica's load is timed at, in words for the provider the plan rents from: SkyPilot's
    default disk where that is ``DISK_READ_CLOUD``'s (AWS), else the same speed said to be assumed for
    ``provider``'s disk, which gpuwise has no figure for."""
    speed = f"{DISK_READ_BYTES_PER_S / 2**20:g} MiB/s"
    if cloud == DISK_READ_CLOUD:
        return f"{speed}, SkyPilot's default disk on AWS"
    return f"an assumed {speed} for {provider}'s disk, the speed of SkyPilot's default disk on AWS"


def _start_note(plan: LaunchPlan) -> str:
    """How long a replica may take to serve (``readiness_initial_delay_s``), and the vLLM that setup installs."""
    return (f"a replica whose {VLLM_READINESS_PATH} has not answered {_initial_delay_s(plan)} s after its setup is "
            f"replaced (initial_delay_seconds: {_download_words(plan)}its load from disk at "
            f"{disk_read_words(plan.skypilot_cloud, plan.provider)}; never less than SkyServe's "
            f"{SKYSERVE_DEFAULT_INITIAL_DELAY_S} s); setup installs vLLM {VLLM_VERSION}, whose defaults the plan "
            f"models")
