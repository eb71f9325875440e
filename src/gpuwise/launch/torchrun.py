"""torchrun command lines for a launch plan: one per node, the user's command as the worker.

One node: ``--standalone`` (a local rendezvous). Several: a static rendezvous on node 0
(``--node-rank``, ``--master-addr``), as SkyPilot's and PyTorch's multi-node examples do. Every line
restarts the workers up to ``MAX_RESTARTS`` times; a worker that uses ``gpuwise.guard`` resumes from
its newest checkpoint. torchrun runs as ``python -m gpuwise.guard.torchrun`` (the same arguments), which
exits 75 where torchrun would exit 1. A preempted worker exits with 75 (``gpuwise.guard.EXIT_RESTART``):
:func:`supervised` wraps a line in the loop that starts it again on 75 and stops on anything else. Each
node's block first exports the batch split and sharding the plan is priced on (``LaunchPlan.env``:
GPUWISE_MICRO_BATCH …, GPUWISE_SHARDING …), which torchrun hands on to its workers, and writes the plan's
DeepSpeed config beside the command (a ZeRO plan: ``LaunchPlan.files``).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gpuwise.errors import EXIT_RESTART
from gpuwise.launch.plan import MASTER_PORT, MAX_RESTARTS, LaunchPlan
from gpuwise.launch.sharding import write_files_lines

# torchrun itself exits 1 whatever its workers' code; the guard's wrapper takes the same arguments and
# keeps a preempted worker's 75, which the restart loop of `supervised` waits for.
LAUNCHER = ("python", "-m", "gpuwise.guard.torchrun")


MASTER_ADDR_VAR = "MASTER_ADDR"     # what a multi-node block reads node 0's address from


class ShellWord(str):
    """An argument gpuwise itself writes for the node's shell to expand (``--master-addr=$MASTER_ADDR``,
    ``--node-rank=$SKYPILOT_NODE_RANK``): ``shell_line`` leaves it unquoted. Every other argument, the user's
    command above all, is quoted as written: a ``$`` the user quoted stays a ``$``."""


def torchrun_argv(plan: LaunchPlan, node_rank: int | str = 0, *, master_addr: str = f"${MASTER_ADDR_VAR}",
                  nproc_per_node: int | str | None = None, nnodes: int | str | None = None) -> list[str]:
    """The torchrun argv of one node. ``nproc_per_node``/``nnodes``/``node_rank``/``master_addr`` may be shell
    variables (SkyPilot's): gpuwise's own options are ``ShellWord``s, the user's command plain strings."""
    nproc = str(nproc_per_node if nproc_per_node is not None else plan.gpus_per_node)
    nodes = nnodes if nnodes is not None else plan.nodes
    own = ["--standalone"] if nodes == 1 else [
        f"--nnodes={nodes}", f"--node-rank={node_rank}", f"--master-addr={master_addr}", f"--master-port={MASTER_PORT}"]
    own += [f"--nproc-per-node={nproc}", f"--max-restarts={MAX_RESTARTS}"]
    return [*LAUNCHER, *map(ShellWord, own), *plan.script_argv]


def worker_argv(plan: LaunchPlan, node_rank: int | str = 0, **torchrun_kwargs) -> list[str]:
    """What a node runs: torchrun over its GPUs (``torchrun_argv``), or, for a layer split
    (``LaunchPlan.one_process``), the command itself, once, seeing every GPU."""
    if plan.one_process:
        return list(plan.command.process_argv)
    return torchrun_argv(plan, node_rank, **torchrun_kwargs)


def shell_line(argv: list[str]) -> str:
    """``argv`` as one shell line: gpuwise's own ``ShellWord``s as written, for the shell to expand its variables
    on the node; every other argument quoted (``shlex.quote``), so the command runs with the arguments the user
    gave it, ``$``, quotes and spaces included."""
    return " ".join(a if isinstance(a, ShellWord) else shlex.quote(a) for a in argv)


def torchrun_lines(plan: LaunchPlan) -> list[str]:
    """One shell line per node, in node-rank order."""
    return [shell_line(worker_argv(plan, rank)) for rank in range(plan.nodes)]


def master_addr_check() -> str:
    """The line a block of several nodes runs before anything else: without ``MASTER_ADDR`` torchrun would fail
    later on a rendezvous endpoint ':29500'; this stops the block at once with a line that says what to set."""
    return f': "${{{MASTER_ADDR_VAR}:?set {MASTER_ADDR_VAR} to the address of node 0, reachable from every node}}"'


def supervised(line: str) -> str:
    """``line`` restarted while it exits with the guard's restart code (preempted, checkpointed)."""
    return (f"until {line}; do\n  code=$?\n  [ $code -eq {EXIT_RESTART} ] || exit $code\n"
            f"  echo \"gpuwise.guard: checkpointed and stopped (exit {EXIT_RESTART}), restarting\"\ndone")


def export_line(env: dict[str, str]) -> str | None:
    """``export NAME=value …`` of ``env`` (None where it is empty)."""
    if not env:
        return None
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items())


def install_line(wheel: Path | None) -> str:
    """The line each node runs first: the lines start ``python -m gpuwise.guard.torchrun`` and no package registry
    serves gpuwise, so a node without it installs the wheel copied beside the command (``wheel``:
    :mod:`gpuwise.launch.wheel`, the running version), and stops with one clear line where it cannot."""
    if wheel is None:
        fix = "install gpuwise on every node (pip install from its checkout, or a wheel of it)"
        return f"python -c 'import gpuwise' 2>/dev/null || {{ echo {shlex.quote('error: ' + fix)} >&2; exit 1; }}"
    fix = f"copy {wheel} to the working directory here, then python -m pip install ./{wheel.name}"
    return (f"python -c 'import gpuwise' 2>/dev/null || python -m pip install ./{shlex.quote(wheel.name)} "
            f"|| {{ echo {shlex.quote('error: gpuwise is not installed on this node: ' + fix)} >&2; exit 1; }}")


def render_torchrun(plan: LaunchPlan, wheel: Path | None = None) -> str:
    """What ``gpuwise recommend --emit torchrun`` prints: a comment per node, then its lines: gpuwise installed
    from ``wheel`` where the node lacks it (``install_line``), the plan's environment and files, the command."""
    out = [f"# {plan.count}x {plan.gpu.name} from {plan.provider}: {plan.nodes} node(s) x {plan.gpus_per_node} GPU(s)"]
    out += [f"# note: {n}" for n in plan.notes]
    needs_gpuwise = not plan.one_process      # a layer split runs the command itself, not the guard's torchrun
    if needs_gpuwise:
        out.append("# requires: gpuwise on every node (the lines run python -m gpuwise.guard.torchrun); "
                   + (f"copy {wheel} (a wheel of this gpuwise) beside the command: the first line installs it"
                      if wheel is not None else "the first line checks it"))
    if plan.nodes > 1:
        out.append(f"# {plan.nodes} blocks, one per node: run each on its own machine (block 0 on node 0), not all on "
                   f"one; each needs MASTER_ADDR set to the address of node 0, reachable from every node, and stops "
                   f"without it")
    out.append(f"# each line starts the job again while it exits with {EXIT_RESTART} (the guard checkpointed "
               f"and stopped on preemption)")
    export = export_line(plan.env)      # on every node: each block runs on its own machine
    files = write_files_lines(plan.files)   # the DeepSpeed config of a ZeRO plan, beside the command
    several = plan.nodes > 1
    for rank, line in enumerate(torchrun_lines(plan)):
        head = (f"# node {rank} of {plan.nodes}: run this block on node {rank}'s machine" if several
                else f"# node {rank}")
        out += [head, *([master_addr_check()] if several else []), *([install_line(wheel)] if needs_gpuwise else []),
                *([export] if export else []), *files, supervised(line)]
    return "\n".join(out) + "\n"
