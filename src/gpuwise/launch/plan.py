"""What launching a chosen option means: which GPU and how many, on how many nodes, from which
provider, running which command. Both emitters (SkyPilot, torchrun) read this one value."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpuwise.catalog.model import GPU
from gpuwise.catalog.topology import provider_entry, topology_for
from gpuwise.errors import GpuwiseError

MASTER_PORT = 29500
MAX_RESTARTS = 3          # torchrun restarts the workers when one dies; the guard resumes them
_PYTHONS = ("python", "python3")


class LaunchError(GpuwiseError):
    pass


@dataclass(frozen=True)
class LaunchPlan:
    gpu: GPU
    count: int                      # GPUs in all
    nodes: int
    gpus_per_node: int
    provider: str
    spot: bool
    skypilot_cloud: str | None      # None: SkyPilot does not know the provider
    region: str | None
    command: tuple[str, ...]        # the user's training command, as argv
    notes: tuple[str, ...] = ()

    @property
    def script_argv(self) -> tuple[str, ...]:
        """The command as torchrun takes it: a script (or -m module) and its arguments."""
        argv = self.command
        if argv and argv[0].rsplit("/", 1)[-1] in _PYTHONS:
            argv = argv[1:]
        return argv


def plan_launch(option, gpu: GPU, command: str) -> LaunchPlan:
    """The launch of ``option`` (a :class:`gpuwise.plan.Option`) running ``command`` on every GPU."""
    if option is None:
        raise LaunchError("nothing to launch: no option meets the request")
    argv = tuple(shlex.split(command or ""))
    if not argv:
        raise LaunchError("--command is empty: give the training command to launch, e.g. "
                          "--command 'python train.py --checkpoint-dir ckpt'")
    topo = topology_for(gpu, option.provider)
    nodes = topo.nodes(option.count)
    per_node = option.count // nodes
    notes = []
    if option.count % nodes:
        raise LaunchError(f"{option.count} GPUs do not split evenly into nodes of {topo.gpus_per_node}")
    if nodes > 1 and not topo.multi_node:
        notes.append(f"{option.provider} does not rent several machines as one cluster ({topo.note}); "
                     f"the {nodes} nodes must reach each other on port {MASTER_PORT}")
    entry = provider_entry(option.provider) or {}
    cloud = entry.get("skypilot_cloud")
    if cloud is None:
        notes.append(f"SkyPilot does not know the provider {option.provider!r}: rent the machine there and "
                     f"run the torchrun lines on it")
    return LaunchPlan(gpu=gpu, count=option.count, nodes=nodes, gpus_per_node=per_node, provider=option.provider,
                      spot=option.spot, skypilot_cloud=cloud, region=entry.get("region"), command=argv,
                      notes=tuple(notes))
