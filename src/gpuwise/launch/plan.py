"""What launching a chosen option means: which GPU and how many, on how many nodes, from which
provider, running which command. Both emitters (SkyPilot, torchrun) read this one value."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpuwise.catalog.model import GPU, not_a_gpu
from gpuwise.catalog.topology import Link, Topology, provider_entry, topology_for
from gpuwise.launch.command import Command, parse_command
from gpuwise.launch.errors import LaunchError
from gpuwise.launch.assumptions import JobAssumptions
from gpuwise.launch.disk import DiskNeed
from gpuwise.launch.sharding import ShardingSetup
from gpuwise.units import format_duration, format_money, format_request_rate

RDZV_PORT = 29500         # node 0's port for torchrun's c10d rendezvous (several nodes)
MAX_RESTARTS = 3          # torchrun restarts every node's workers when one dies; the guard resumes them
ENV_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"   # the GPUs one process of a layer split places the model on

# What a launched script reads to run the batch split the plan is priced on (both emitters set them: the
# torchrun lines export them on every node, a SkyPilot task has them in ``envs``).
ENV_MICRO_BATCH = "GPUWISE_MICRO_BATCH"          # samples (requests) per GPU per forward pass
ENV_GRAD_ACCUM = "GPUWISE_GRAD_ACCUM"            # micro-batches per optimizer step (training)
ENV_EFFECTIVE_BATCH = "GPUWISE_EFFECTIVE_BATCH"  # samples per optimizer step over all GPUs (training)

# a command-line flag that names a batch size per forward pass: --batch-size, --batch_size, --bs, -b,
# --per-device-train-batch-size (HF Trainer's); not --effective-batch or --eval-batch-size
_BATCH_FLAG = re.compile(r"^(-b|--bs|--(per[-_]device[-_]train[-_])?(micro[-_])?batch[-_]size)$")


@dataclass(frozen=True)
class BatchSplit:
    """The batch a plan is priced on: ``micro_batch`` samples on each of ``gpus`` GPUs per forward pass,
    ``grad_accum_steps`` of them per optimizer step, ``micro_batch × grad_accum_steps × gpus`` =
    ``effective_batch`` samples a step (training). Serving (``training`` False): ``micro_batch`` requests
    at a time, on each GPU (``per_gpu``) or on the model split over the GPUs (tensor parallel)."""

    micro_batch: int
    grad_accum_steps: int
    gpus: int
    effective_batch: int
    training: bool = True
    per_gpu: bool = True

    @classmethod
    def of(cls, option, *, training: bool, per_gpu: bool = True) -> "BatchSplit | None":
        """The split of a recommendation's option (None where it has no batch)."""
        micro = getattr(option, "batch_size", None)
        if not micro:
            return None
        accum = getattr(option, "grad_accum_steps", 1) or 1
        return cls(micro, accum, option.count, micro * accum * option.count, training, per_gpu)

    @property
    def env(self) -> dict[str, str]:
        """The variables the launched script can read the split from."""
        if not self.training:
            return {ENV_MICRO_BATCH: str(self.micro_batch)}
        return {ENV_MICRO_BATCH: str(self.micro_batch), ENV_GRAD_ACCUM: str(self.grad_accum_steps),
                ENV_EFFECTIVE_BATCH: str(self.effective_batch)}

    def note(self, argv: tuple[str, ...] = ()) -> str:
        """The split in words for the launch's header and ``launch.notes``: what the user's command must run."""
        names = [f"${name}" for name in self.env]
        env = (f"sets {', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else f"sets {names[0]}")
        if not self.training:
            where = ("on each GPU" if self.per_gpu else "on the one GPU" if self.gpus == 1
                     else f"on the model split over {self.gpus} GPUs")
            return (f"the plan is priced on batches of {self.micro_batch} requests {where}: your command must run "
                    f"that batch (gpuwise does not rewrite its flags; it {env} for the script to read)")
        steps = f"{self.grad_accum_steps} accumulation step{'s' if self.grad_accum_steps > 1 else ''}"
        said = (f"the plan is priced on micro-batch {self.micro_batch} per GPU x {steps} x {self.gpus} "
                f"GPU{'s' if self.gpus > 1 else ''} = effective batch {self.effective_batch} samples per optimizer "
                f"step: your command must run that split (gpuwise does not rewrite its flags; it {env} for the "
                f"script to read)")
        given = _batch_flag(argv)
        if given is not None and given[1] != str(self.micro_batch):
            flag, value = given
            if value == str(self.effective_batch):
                every = " on every GPU" if self.gpus > 1 else ""
                how = ([f"divides it over the {self.gpus} GPUs"] if self.gpus > 1 else []) + (
                    [f"accumulates {self.grad_accum_steps} micro-batches of {self.micro_batch}"]
                    if self.grad_accum_steps > 1 else [])
                said += (f"; as written, {flag} {value} runs {value} samples a forward pass{every} unless the "
                         f"script {' and '.join(how)}")
            else:
                said += (f"; as written, {flag} {value} is neither the micro-batch ({self.micro_batch}) nor the "
                         f"effective batch ({self.effective_batch}): check what the script runs")
        return said


def _batch_flag(argv: tuple[str, ...]) -> tuple[str, str] | None:
    """The first batch-size flag of a command and its value (``--batch-size 256``, ``--batch-size=256``)."""
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if _BATCH_FLAG.match(flag):
            if not eq:
                value = argv[i + 1] if i + 1 < len(argv) else ""
            return (flag, value) if value.isdigit() else None
    return None


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
    command: Command                # the user's training command, checked (``parse_command``)
    notes: tuple[str, ...] = ()
    batch: BatchSplit | None = None  # the batch split the plan is priced on (None: not known)
    sharding: ShardingSetup | None = None  # ZeRO/FSDP/offload the plan is priced on (None: plain DDP)
    one_process: bool = False       # HF generate's layer split: one process sees every GPU, no torchrun
    # precision, checkpointing, LoRA, sequence length … the plan is priced on (None: not known)
    assumptions: JobAssumptions | None = None
    # the network the nodes are timed over (``Topology.network``: efa, infiniband, roce, ethernet); None on one node
    network: Link | None = None
    # the disk each node (a server's replica) needs: the model, the guard's checkpoints (None: not known; SkyPilot's
    # default disk)
    disk: DiskNeed | None = None
    # copies of a server behind a load balancer (a serving option at --request-rate); 1 for any other job
    replicas: int = 1
    server: bool = False            # a server (``vllm serve``) under SkyServe: its machines are replicas (machine_word)
    # a server's local model folder (with its weights) that its service uploads to each replica; None: vLLM
    # downloads the model by its Hub id
    model_dir: Path | None = None
    # what recommend priced the option at, as its "Best:" line says it (``priced_words``); None: not known
    priced: str | None = None

    @property
    def priced_lines(self) -> list[str]:
        """The header's comment with what the launch was priced at (none where not known): what the emitted text
        is about to spend, which the table it replaces said."""
        return [f"# priced: {self.priced} (gpuwise's estimate for this option)"] if self.priced else []

    @property
    def env(self) -> dict[str, str]:
        """The environment the launched command runs with: the batch split (``BatchSplit.env``), the
        sharding (``ShardingSetup.env``: GPUWISE_SHARDING, GPUWISE_DEEPSPEED_CONFIG …), the job's assumptions
        (``JobAssumptions.env``: GPUWISE_PRECISION, GPUWISE_GRAD_CHECKPOINTING …), every GPU of the node
        for one process (``CUDA_VISIBLE_DEVICES``), and the command's own ``NAME=value`` prefix, which wins."""
        env = dict(self.batch.env) if self.batch is not None else {}
        env.update(self.sharding.env if self.sharding is not None else {})
        env.update(self.assumptions.env if self.assumptions is not None else {})
        if self.one_process:
            env[ENV_VISIBLE_DEVICES] = ",".join(map(str, range(self.gpus_per_node)))
        return {**env, **dict(self.command.env)}

    @property
    def disk_size_gb(self) -> int | None:
        """The disk a SkyPilot task asks for on each node (``DiskNeed.disk_size_gb``: the system's share included);
        None where no task asks for one: SkyPilot does not know the provider (its machine, rented by hand, comes with
        its own disks: ``DiskNeed.job_disk_gb`` is the job's share), or the disk is not known."""
        return self.disk.disk_size_gb if self.disk is not None and self.skypilot_cloud is not None else None

    @property
    def files(self) -> dict[str, str]:
        """Files the launch writes beside the command before it starts (name -> text): the DeepSpeed config
        of a ZeRO plan."""
        return self.sharding.files(self.batch) if self.sharding is not None else {}

    @property
    def script_argv(self) -> tuple[str, ...]:
        """The command as torchrun takes it after its own options: a script (or --module, or --no-python and
        a program) and its arguments (``Command.torchrun_args``)."""
        return self.command.torchrun_args


def priced_words(option) -> str | None:
    """What recommend priced ``option`` (a ``Quote``) at, in the words of its "Best:" line: the job's time and cost
    in the ranking currency (with a spot option's expected preemptions); a server at a request rate costs by the
    hour (its quote is of one hour). None where the option carries no price."""
    cost, currency = getattr(option, "total_cost_ranked", None), getattr(option, "ranking_currency", None)
    if cost is None or currency is None:
        return None
    money = format_money(cost, currency)
    if rate := getattr(option, "request_rate_per_s", None):
        replicas = getattr(option, "replicas", None) or 1
        return f"{money} an hour for {replicas} replica{'s' if replicas > 1 else ''} at {format_request_rate(rate)}"
    time_s = getattr(option, "total_time_s", None)
    return f"{format_duration(time_s)}, {money}" if time_s else money


def launch_region(option) -> str | None:
    """The region ``option`` launches in: its offer's, where the price it is quoted at names one (a user's eu-west-1
    price, a live offer of us-west-2) at a provider SkyPilot launches in a region of (one with a launch region in
    ``topology.toml``), else that launch region (the shipped prices'). A marketplace's location (RunPod's
    ``CA-MTL-1`` is a data centre, SkyPilot's zone, not a region) is never the task's region."""
    launch = (provider_entry(option.provider) or {}).get("region")
    offer = getattr(option, "offer", None)
    if launch is not None and offer is not None and offer.region:
        return offer.region
    return launch


def skypilot_cloud(provider: str | None) -> str | None:
    """The SkyPilot cloud that rents ``provider``'s machines (its ``skypilot_cloud`` in the topology data); None
    where SkyPilot does not know the provider (AutoDL): no SkyPilot task or SkyServe service can launch there."""
    return (provider_entry(provider) or {}).get("skypilot_cloud")


def machine_word(server: bool) -> str:
    """What one machine of a launch is called: a replica for a server (SkyServe starts copies of it behind a load
    balancer), a node for any other job (one of torchrun's)."""
    return "replica" if server else "node"


def node_layout_refusal(count: int, topo: Topology) -> str | None:
    """Why ``count`` GPUs cannot run as the machines the estimate times them on (None: they can). Those are
    ``topo``'s (``Topology.nodes``, what estimate and recommend time and describe): up to a machine's GPUs on one,
    beyond it whole machines of ``topo.gpus_per_node``; 12 GPUs on 8-GPU machines are neither."""
    per = topo.gpus_per_node
    if count <= per or count % per == 0:
        return None
    return (f"{count} GPUs are not whole machines of {per} ({topo.gpu_id}"
            f"{f' at {topo.provider}' if topo.provider else ''}): their time is for {topo.nodes(count)} nodes of {per}; "
            f"launch {count // per * per} or {topo.nodes(count) * per} GPUs")


def node_layout(count: int, topo: Topology) -> tuple[int, int]:
    """(nodes, GPUs per node) of ``count`` GPUs, as estimate and recommend time them (``node_layout_refusal``);
    LaunchError where they are not whole machines."""
    why = node_layout_refusal(count, topo)
    if why:
        raise LaunchError(why)
    nodes = topo.nodes(count)
    return nodes, count // nodes


def plan_launch(option, gpu: GPU, command: str, *, batch: BatchSplit | None = None,
                sharding: ShardingSetup | None = None, one_process: bool = False,
                assumptions: JobAssumptions | None = None, disk: DiskNeed | None = None,
                server: bool = False, model_dir: Path | None = None) -> LaunchPlan:
    """The launch of ``option`` (a :class:`gpuwise.plan.Option`) running ``command`` on every GPU.
    ``batch``: the split the option is priced on (``BatchSplit.of``), said first in the notes and set in
    the environment: gpuwise cannot rewrite the command's flags. ``sharding``: the ZeRO stage / FSDP /
    offload it is priced on (``ShardingSetup.of``), said next, set in the environment, its DeepSpeed config
    written beside the command. ``assumptions``: the precision, gradient checkpointing, LoRA/QLoRA, sequence
    length … it is priced on (``JobAssumptions.of``), said next and set in the environment. ``disk``: the disk
    each node needs (``DiskNeed``), said next and asked for by a SkyPilot task (``disk_size``). ``one_process``: the option is HF generate's layer split
    (``gpuwise.workload.parallelism.splits_layers``), one process that places the model on every GPU: the
    command runs once, not under torchrun (whose N processes would each load the whole model). ``gpu``: the
    option's catalog GPU (``catalog.gpu(option.gpu)``); a name, or another GPU than the option's, is refused
    (LaunchError): the option is priced and timed on its own GPU. A serving option's ``replicas`` (at a request
    rate) become the plan's: that many copies of these machines, each running ``command`` (a server). ``server``:
    ``command`` is a server's (``vllm serve``) that SkyServe runs, its machines replicas (``machine_word``), which read
    no dataset; ``model_dir``: its local model folder, which the service uploads (``LaunchPlan.model_dir``)."""
    if option is None:
        raise LaunchError("nothing to launch: no option meets the request")
    priced_on = getattr(option, "gpu", None)     # a recommendation's option names its GPU by id
    if (why := not_a_gpu(gpu)) is not None:
        raise LaunchError(why if priced_on is None else f"gpu must be the option's catalog GPU, not {gpu!r:.40}: "
                                                        f"catalog.gpu({priced_on!r}) gives it")
    if priced_on is not None and gpu.id != priced_on:
        raise LaunchError(f"gpu {gpu.id} is not the option's GPU: it is priced on {priced_on} "
                          f"(catalog.gpu({priced_on!r}) gives that one)")
    parsed = parse_command(command)
    topo = topology_for(gpu, option.provider)
    nodes, per_node = node_layout(option.count, topo)
    notes = [batch.note(parsed.argv)] if batch is not None else []
    if sharding is not None:
        notes.append(sharding.note())
    if assumptions is not None:
        notes.append(assumptions.note())
    cloud = skypilot_cloud(option.provider)
    if disk is not None:
        notes.append(disk.note(machine=machine_word(server), reads_dataset=not server,
                               rented_at=option.provider if cloud is None else None))
    if one_process and nodes > 1:
        raise LaunchError(f"HF generate's layer split runs in one process on one machine: {option.count} GPUs are "
                          f"more than a node of {topo.gpus_per_node} at {option.provider}")
    if one_process and option.count > 1:
        notes.append(f'the plan is HF generate\'s layer split (device_map="auto"): one process sees all '
                     f"{option.count} GPUs ({ENV_VISIBLE_DEVICES}) and places the layers on them, so the command "
                     f"runs once, not under torchrun ({option.count} torchrun processes would each load the "
                     f"whole model)")
    if nodes > 1 and not topo.multi_node:
        notes.append(f"{option.provider} does not rent several machines as one cluster ({topo.note}); "
                     f"the {nodes} nodes must reach each other (node 0 on port {RDZV_PORT})")
    if cloud is None:
        notes.append(f"SkyPilot does not know the provider {option.provider!r}: rent the machine there and "
                     f"run the torchrun lines on it")
    region = launch_region(option)
    return LaunchPlan(gpu=gpu, count=option.count, nodes=nodes, gpus_per_node=per_node, provider=option.provider,
                      spot=option.spot, skypilot_cloud=cloud, region=region, command=parsed,
                      notes=tuple(notes), batch=batch, sharding=sharding, one_process=one_process,
                      assumptions=assumptions, network=topo.network if nodes > 1 else None, disk=disk,
                      replicas=getattr(option, "replicas", None) or 1, server=server, model_dir=model_dir,
                      priced=priced_words(option))
