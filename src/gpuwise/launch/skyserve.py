"""A SkyServe service for a serving plan (https://docs.skypilot.co/en/latest/serving/service-yaml-spec.html):
``sky serve up`` starts the plan's replicas and a load balancer in front of them.

``service`` probes each replica at vLLM's ``/health`` (200 once its engine serves) and keeps the plan's replica
count (``replicas``: the fewest that carry the request rate); ``resources`` are one replica's machine as a training
task's are one node's (``skypilot_resources``: the accelerator and its count, spot, ``infra``, the disk for the
model: ``LaunchPlan.disk``) and open the port vLLM listens on, which SkyServe's load balancer forwards to;
``setup`` installs vLLM; ``run`` is the ``vllm serve`` line the plan is priced with (``vllm_serve_line``).
``secrets`` passes a Hugging Face token (``HF_TOKEN``, empty unless ``sky serve up --secret HF_TOKEN``) for a
gated model's download. Neither gpuwise nor torchrun runs on the replicas.
"""

from __future__ import annotations

import shlex

from gpuwise.launch.plan import LaunchPlan
from gpuwise.launch.server import VLLM_PORT, VLLM_READINESS_PATH
from gpuwise.launch.skypilot import dump_task, skypilot_resources

HF_TOKEN = "HF_TOKEN"        # what huggingface_hub (and so vLLM's download) reads the token from; empty: none
SERVE_UP = "sky serve up"    # SkyPilot's command that starts a service


def skyserve_task(plan: LaunchPlan, *, name: str | None = None) -> dict:
    """The service as a task mapping, in SkyPilot's YAML schema: ``plan.command`` (a ``vllm serve`` line that
    listens on ``VLLM_PORT``) on each of ``plan.replicas``."""
    return {
        "name": name or f"gpuwise-serve-{plan.gpu.id}-x{plan.count}",
        "service": {"readiness_probe": VLLM_READINESS_PATH, "replicas": plan.replicas},
        "resources": {**skypilot_resources(plan), "ports": VLLM_PORT},
        "secrets": {HF_TOKEN: ""},
        "setup": "pip install vllm",
        "run": shlex.join(plan.command.process_argv) + "\n",     # a literal block, as a training task's run
    }


def render_skyserve(plan: LaunchPlan) -> str:
    """What ``gpuwise recommend --emit skypilot`` prints for a server: the notes as comments, then the YAML."""
    replicas = f"{plan.replicas} replica{'s' if plan.replicas > 1 else ''} of "
    head = [f"# {replicas}{plan.count}x {plan.gpu.name} from {plan.provider}: {SERVE_UP} <this file>"]
    head += [f"# note: {n}" for n in plan.notes]
    head.append(f"# note: {SERVE_UP} starts the replicas and a load balancer; `sky serve status` names its "
                f"endpoint, which forwards to vLLM's OpenAI-compatible API on port {VLLM_PORT} (/v1/completions)")
    head.append(f"# note: vLLM downloads the model on each replica; a gated one downloads only with your Hugging Face "
                f"token: {SERVE_UP} --secret {HF_TOKEN} <this file> (from ${HF_TOKEN} here)")
    return "\n".join(head) + "\n" + dump_task(skyserve_task(plan))
