"""A SkyPilot task YAML for a launch plan (https://docs.skypilot.co/en/latest/reference/yaml-spec.html).

``resources`` names the accelerator as SkyPilot's catalog of that cloud does, with the count per node,
``use_spot``, ``infra: cloud/region`` (the region the catalog's prices are for; a spot launch's header says its
recovery is bound to it: ``region_note``), and ``disk_size`` where the plan knows the disk its job needs (the model
and the guard's checkpoints: ``LaunchPlan.disk``); ``num_nodes`` the nodes; ``envs`` the batch split and sharding
the plan is priced on (``LaunchPlan.env``: GPUWISE_MICRO_BATCH …, GPUWISE_SHARDING …, exported to ``setup`` and
``run``, and overridable by ``sky launch --env``); ``run`` writes the plan's DeepSpeed config (a ZeRO plan,
``LaunchPlan.files``), then starts the user's command under torchrun on every node (several nodes: torchrun's c10d
rendezvous on the first of ``SKYPILOT_NODE_IPS``, hosted by node 0, its id ``SKYPILOT_TASK_ID``, the same on every
node and after a managed job's recovery), sampled by ``gpuwise run`` (a new run log per start, named by node rank
and start: ``run_log_name``) and restarted while the guard exits with its restart code. gpuwise itself comes as a
wheel of the running version (:mod:`gpuwise.launch.wheel`) that the task uploads (``file_mounts``) and ``setup``
installs: no package registry serves gpuwise. Where the command names its interpreter (``/usr/bin/python3
train.py``), torchrun runs under it, and ``setup`` installs the job's requirements and the wheel with that
interpreter's pip too.

A spot option is launched as a managed job (``sky jobs launch``), which SkyPilot relaunches after a
preemption; ``sky launch`` on a spot cluster does not recover it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from gpuwise.launch.plan import LaunchError, LaunchPlan
from gpuwise.launch.sharding import write_files_lines
from gpuwise.launch.torchrun import (DEFAULT_PYTHON, launch_python, rdzv_env_lines, shell_line, supervised,
                                     worker_argv)

# gpuwise GPU id -> SkyPilot accelerator name, per cloud where the names differ (from SkyPilot 0.14's
# catalog fetchers: sky/catalog/data_fetchers/fetch_{aws,gcp,lambda_cloud,runpod}.py).
ACCELERATORS = {
    "t4": "T4", "l4": "L4", "a10g": "A10G", "a10": "A10", "a40": "A40", "a30": "A30", "l40": "L40", "l40s": "L40S",
    "v100-16gb-sxm2": "V100", "v100-32gb-sxm2": "V100-32GB", "v100-16gb-pcie": "V100", "v100-32gb-pcie": "V100-32GB",
    "a100-40gb-sxm4": "A100", "a100-40gb-pcie": "A100", "a100-80gb-sxm4": "A100-80GB", "a100-80gb-pcie": "A100-80GB",
    "h100-sxm": "H100", "h100-pcie": "H100", "h100-nvl": "H100-NVL", "h200": "H200", "b200": "B200",
    "rtx-3090": "RTX3090", "rtx-4090": "RTX4090", "rtx-5090": "RTX5090", "rtx-a4000": "RTXA4000",
    "rtx-a5000": "RTXA5000", "rtx-a6000": "RTXA6000", "rtx-6000-ada": "RTX6000-Ada",
}
CLOUD_ACCELERATORS = {
    "runpod": {"a100-80gb-sxm4": "A100-80GB-SXM", "h100-sxm": "H100-SXM", "h200": "H200-SXM",
               "v100-16gb-sxm2": "V100-SXM2", "v100-32gb-sxm2": "V100-SXM2-32GB"},
    "lambda": {"rtx-a6000": "A6000"},
}


# The networks between nodes that a cloud attaches only when asked: SkyPilot's ``network_tier: best`` attaches EFA on
# AWS (sky/clouds/aws.py) and GPUDirect-TCPX on GCP's A3 (sky/clouds/gcp.py); its default tier leaves the nodes on
# the VPC's ethernet, far slower than the network the plan's multi-node step is timed over.
FAST_NETWORKS = ("efa", "infiniband", "roce")

REMOTE_WHEEL_DIR = "~/.gpuwise/wheels"


def remote_wheel(wheel: Path) -> str:
    """Where the task puts the uploaded wheel on every node."""
    return f"{REMOTE_WHEEL_DIR}/{wheel.name}"


def setup_script(wheel: Path, python: str = DEFAULT_PYTHON) -> str:
    """The task's ``setup``: the job's own requirements (when workdir has them), then the uploaded wheel of
    this gpuwise (the same code, so the remote ``gpuwise run`` reads and writes what this one does). A command
    that names its interpreter (``python``, ``launch_python``) runs under it with torchrun: the requirements go to
    that interpreter's pip, and the wheel to it as well as to ``pip`` (the ``gpuwise`` command on PATH)."""
    own_pip = [] if python == DEFAULT_PYTHON else [f"{shlex.quote(python)} -m pip"]
    job_pip = (own_pip or ["pip"])[0]
    return (f"if [ -f requirements.txt ]; then {job_pip} install -r requirements.txt; fi\n"
            + "\n".join(f"{pip} install {remote_wheel(wheel)}" for pip in ["pip", *own_pip]))


def launch_command(plan: LaunchPlan) -> str:
    """The SkyPilot command that starts the task: a managed job for spot (relaunched after preemption)."""
    return "sky jobs launch" if plan.spot else "sky launch -c gpuwise"


def accelerator_name(gpu_id: str, cloud: str | None, based_on: str | None = None) -> str:
    """SkyPilot's name of the accelerator ``gpu_id`` is on ``cloud``; a variant (``based_on``: its base GPU's id,
    the same chip in another machine) is rented as its base."""
    for gid in (gpu_id, based_on):
        name = gid and (CLOUD_ACCELERATORS.get(cloud or "", {}).get(gid) or ACCELERATORS.get(gid))
        if name:
            return name
    raise LaunchError(f"no SkyPilot accelerator name known for GPU {gpu_id!r}; emit torchrun lines instead "
                      f"(--emit torchrun)")


def needs_best_network(plan: LaunchPlan) -> bool:
    """Whether the nodes must be asked for the cluster network their step is timed over (``FAST_NETWORKS``)."""
    return plan.network is not None and plan.network.kind in FAST_NETWORKS


def efa_interfaces_note(plan: LaunchPlan) -> str | None:
    """On AWS, SkyPilot's ``network_tier: best`` attaches one EFA interface of the instance's several unless its
    own config (not the task's) sets ``aws.use_internal_ips`` (sky/clouds/aws.py); the step is timed over all."""
    if not needs_best_network(plan) or plan.network.kind != "efa" or plan.skypilot_cloud != "aws":
        return None
    return (f"the {plan.nodes} nodes are timed over {plan.network.description}: network_tier: best attaches EFA, "
            f"but SkyPilot uses only one EFA interface of each instance unless your SkyPilot config "
            f"(~/.sky/config.yaml) sets aws: use_internal_ips: true (with use_ssm: true or an ssh_proxy_command)")


def region_note(plan: LaunchPlan) -> str | None:
    """Why ``infra`` names a region, where a spot launch's recovery is bound by it (None elsewhere): the plan is
    priced at that region's offers (the catalog's prices are one region's: ``region`` in its topology data), and a
    managed job (a spot replica) is recovered only there; naming the cloud alone lets recovery use other regions,
    at their prices."""
    if not plan.spot or not plan.region or plan.skypilot_cloud is None:
        return None
    return (f"infra: {plan.skypilot_cloud}/{plan.region} names the region whose prices the plan is quoted at, and a "
            f"preempted spot machine is relaunched only there; infra: {plan.skypilot_cloud} lets SkyPilot relaunch it "
            f"in the cloud's other regions, at their prices")


def run_log_name() -> str:
    """The run log of one start on one node, as the task's shell expands it: the node rank, the start's number
    on that node (``$((start += 1))`` counts the loop's restarts in its shell) and the time, as ``gpuwise run``
    names its own logs: ``gpuwise-run-node0-start2-20260101-120000.db``."""
    return "gpuwise-run-node${SKYPILOT_NODE_RANK:-0}-start$((start += 1))-$(date +%Y%m%d-%H%M%S).db"


def skypilot_resources(plan: LaunchPlan) -> dict:
    """A task's ``resources`` for ``plan``'s machines (one node, or one replica of a service): the accelerator and
    its count a node, ``use_spot``, ``infra``, the disk (``disk_size``) and the network the plan is timed over.
    LaunchError where SkyPilot does not know the provider."""
    if plan.skypilot_cloud is None:
        raise LaunchError(f"SkyPilot does not know the provider {plan.provider!r}: use --emit torchrun and run "
                          f"the lines on a machine rented there")
    resources = {"accelerators": f"{accelerator_name(plan.gpu.id, plan.skypilot_cloud, plan.gpu.based_on)}:{plan.gpus_per_node}",
                 "use_spot": plan.spot,
                 "infra": "/".join(p for p in (plan.skypilot_cloud, plan.region) if p)}
    if plan.disk_size_gb is not None:
        resources["disk_size"] = plan.disk_size_gb
    if needs_best_network(plan):
        resources["network_tier"] = "best"
    return resources


def skypilot_task(plan: LaunchPlan, wheel: Path, *, name: str | None = None) -> dict:
    """The task as a mapping, in SkyPilot's YAML schema; ``wheel`` is the local gpuwise wheel it uploads."""
    resources = skypilot_resources(plan)
    # node 0 hosts the rendezvous ($((…)) is 1 there, 0 elsewhere); SkyPilot's task id is the same on every node
    line = shell_line(worker_argv(plan, rdzv_host="$((SKYPILOT_NODE_RANK==0))", master_addr="$MASTER_ADDR",
                                  job_id="$SKYPILOT_TASK_ID", nproc_per_node="$SKYPILOT_NUM_GPUS_PER_NODE",
                                  nnodes="$SKYPILOT_NUM_NODES")
                      if plan.nodes > 1 else worker_argv(plan, nproc_per_node="$SKYPILOT_NUM_GPUS_PER_NODE"))
    run = ""
    if plan.nodes > 1:
        run += 'MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n'
    run += "".join(f"{line}\n" for line in rdzv_env_lines(plan))    # a node started again re-joins the job
    run += "".join(f"{line}\n" for line in write_files_lines(plan.files))   # the DeepSpeed config, on every node
    # each start (a restart after exit 75, a second `sky exec` in the same workdir) gets a new run log of its own,
    # named by node rank, start and time (``run_log_name``): a run log holds one run, and `gpuwise run` creates
    # its --log exclusively (an existing one is refused)
    run += "start=0\n"
    run += supervised(f'gpuwise run --log "{run_log_name()}" -- {line}') + "\n"
    return {
        "name": name or f"gpuwise-{plan.gpu.id}-x{plan.count}",
        "resources": resources,
        "num_nodes": plan.nodes,
        **({"envs": dict(plan.env)} if plan.env else {}),
        "workdir": ".",
        "file_mounts": {remote_wheel(wheel): str(wheel)},
        "setup": setup_script(wheel, launch_python(plan)),
        "run": run,
    }


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_task(task: dict) -> str:
    """A task mapping as SkyPilot's YAML, in the order given, multi-line scripts as literal blocks, and text as
    written: a script or path named in Chinese (``python 训练.py``) stays readable, where PyYAML's default escapes
    every non-ASCII character and turns the whole ``run`` into one double-quoted line of ``\\uXXXX``."""
    return yaml.dump(task, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def render_skypilot(plan: LaunchPlan, wheel: Path) -> str:
    """What ``gpuwise recommend --emit skypilot`` prints: the notes as comments, then the YAML."""
    head = [f"# {plan.count}x {plan.gpu.name} from {plan.provider}: {launch_command(plan)} <this file>",
            *plan.priced_lines]
    head += [f"# note: {n}" for n in plan.notes]
    if (efa := efa_interfaces_note(plan)) is not None:
        head.append(f"# note: {efa}")
    if plan.spot:
        head.append("# note: a managed job is relaunched on a new machine after a preemption: keep the "
                    "checkpoint directory on storage that outlives it (a bucket in file_mounts)")
    if (region := region_note(plan)) is not None:
        head.append(f"# note: {region}")
    head.append(f"# note: setup installs the workdir's requirements.txt and gpuwise from {wheel} "
                f"(a wheel of this gpuwise, uploaded by file_mounts)")
    return "\n".join(head) + "\n" + dump_task(skypilot_task(plan, wheel))
