"""torchrun command lines for a launch plan: one block per node, the user's command as the worker.

One node: ``--standalone`` (a local rendezvous on a free port). Several: torchrun's c10d rendezvous, as its
own "fault tolerant" example runs it (``torch/distributed/run.py``): ``--rdzv-backend=c10d
--rdzv-endpoint=$MASTER_ADDR:29500 --rdzv-id=ID`` with the same id on every node; node 0 hosts it
(``--rdzv-conf=is_host=1``, the others 0: torch's guess from the machine's hostname misses where that resolves
to a loopback address) and the rendezvous gives each node its rank. With it, ``--max-restarts`` restarts every
node's workers together (a node that re-joins the rendezvous makes the others' agents restart theirs: torch's
``SimpleElasticAgent._invoke_run``), and a node whose torchrun is started again joins the running job; a static
rendezvous (``--node-rank``, ``--master-addr``) restarts one node's workers alone, and a restarted node waits for
peers that never come. torchrun runs as ``PY -m gpuwise.guard.torchrun`` (the same arguments), ``PY`` the
interpreter the user's command names (``launcher``: torchrun runs a script with the interpreter it runs under),
which exits 75 where torchrun would exit 1. A preempted worker exits with 75 (``gpuwise.guard.EXIT_RESTART``):
:func:`supervised` wraps a line in the loop that starts it again on 75 and stops on anything else. Each
node's block first checks the interpreter and gpuwise (``interpreter_check``, ``install_line``), exports the
batch split and sharding the plan is priced on (``LaunchPlan.env``: GPUWISE_MICRO_BATCH …, GPUWISE_SHARDING …),
which torchrun hands on to its workers, and writes the plan's DeepSpeed config beside the command (a ZeRO plan:
``LaunchPlan.files``).
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

from gpuwise.errors import EXIT_RESTART
from gpuwise.launch.plan import MAX_RESTARTS, RDZV_PORT, LaunchPlan
from gpuwise.launch.sharding import write_files_lines

# torchrun itself exits 1 whatever its workers' code; the guard's wrapper takes the same arguments and
# keeps a preempted worker's 75, which the restart loop of `supervised` waits for.
GUARD_TORCHRUN = "gpuwise.guard.torchrun"
DEFAULT_PYTHON = "python"       # the launcher's interpreter where the command names none (./train.sh, train.py)
LAUNCHER = (DEFAULT_PYTHON, "-m", GUARD_TORCHRUN)


MASTER_ADDR_VAR = "MASTER_ADDR"     # what a multi-node block reads node 0's address from

# Several nodes: torchrun's agents share the rendezvous's TCP store with the workers by default, and then a later
# rendezvous round republishes its bootstrap address only from an agent that has none yet (torch 2.x,
# elastic/rendezvous/dynamic_rendezvous.py, ``next_rendezvous``): a node whose torchrun the loop starts again
# waits 60 s for an address that never comes, and the job fails on every node. Not sharing it republishes it on
# every round.
RDZV_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


class ShellWord(str):
    """An argument gpuwise itself writes for the node's shell to expand (``--rdzv-endpoint=$MASTER_ADDR:29500``,
    ``--rdzv-conf=is_host=$((SKYPILOT_NODE_RANK==0))``): ``shell_line`` leaves it unquoted. Every other argument, the user's
    command above all, is quoted as written: a ``$`` the user quoted stays a ``$``."""


def launch_python(plan: LaunchPlan) -> str:
    """The interpreter that runs the guard's torchrun: the Python the command names (``/usr/bin/python3
    train.py``), else ``python``. torchrun starts a script with the interpreter it runs under (``sys.executable``),
    so another one would run the script in another environment."""
    return plan.command.python or DEFAULT_PYTHON


def launcher(plan: LaunchPlan) -> tuple[str, ...]:
    """``PY -m gpuwise.guard.torchrun``, ``PY`` the command's interpreter (``launch_python``)."""
    return (launch_python(plan), "-m", GUARD_TORCHRUN)


def rdzv_id(plan: LaunchPlan) -> str:
    """The rendezvous id every node's torchrun line gives (``--rdzv-id``): the same on each node and on each
    start, and another for another job (GPU, count, provider, command), which may share the endpoint."""
    job = shlex.join([plan.gpu.id, str(plan.count), plan.provider, *plan.command.argv])
    return f"gpuwise-{hashlib.sha256(job.encode()).hexdigest()[:12]}"


def torchrun_argv(plan: LaunchPlan, *, rdzv_host: int | str = 1, master_addr: str = f"${MASTER_ADDR_VAR}",
                  job_id: str | None = None, nproc_per_node: int | str | None = None,
                  nnodes: int | str | None = None) -> list[str]:
    """The torchrun argv of one node. Several nodes: the c10d rendezvous at ``master_addr``:RDZV_PORT with the id
    ``job_id`` (``rdzv_id``), hosted where ``rdzv_host`` is 1 (node 0), joined where 0. ``nproc_per_node``/``nnodes``/
    ``rdzv_host``/``master_addr``/``job_id`` may be shell variables (SkyPilot's): gpuwise's own options are
    ``ShellWord``s, the user's command plain strings."""
    nproc = str(nproc_per_node if nproc_per_node is not None else plan.gpus_per_node)
    nodes = nnodes if nnodes is not None else plan.nodes
    own = ["--standalone"] if nodes == 1 else [
        f"--nnodes={nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={master_addr}:{RDZV_PORT}",
        f"--rdzv-id={job_id if job_id is not None else rdzv_id(plan)}", f"--rdzv-conf=is_host={rdzv_host}"]
    own += [f"--nproc-per-node={nproc}", f"--max-restarts={MAX_RESTARTS}"]
    return [*launcher(plan), *map(ShellWord, own), *plan.script_argv]


def worker_argv(plan: LaunchPlan, **torchrun_kwargs) -> list[str]:
    """What a node runs: torchrun over its GPUs (``torchrun_argv``), or, for a layer split
    (``LaunchPlan.one_process``), the command itself, once, seeing every GPU."""
    if plan.one_process:
        return list(plan.command.process_argv)
    return torchrun_argv(plan, **torchrun_kwargs)


def shell_line(argv: list[str]) -> str:
    """``argv`` as one shell line: gpuwise's own ``ShellWord``s as written, for the shell to expand its variables
    on the node; every other argument quoted (``shlex.quote``), so the command runs with the arguments the user
    gave it, ``$``, quotes and spaces included."""
    return " ".join(a if isinstance(a, ShellWord) else shlex.quote(a) for a in argv)


def torchrun_lines(plan: LaunchPlan) -> list[str]:
    """One shell line per node: node 0's hosts the rendezvous, the others' join it (their ranks are the
    rendezvous's to give)."""
    return [shell_line(worker_argv(plan, rdzv_host=int(node == 0))) for node in range(plan.nodes)]


def master_addr_check() -> str:
    """The line a block of several nodes runs before anything else: without ``MASTER_ADDR`` torchrun would fail
    later on a rendezvous endpoint ':29500'; this stops the block at once with a line that says what to set."""
    return f': "${{{MASTER_ADDR_VAR}:?set {MASTER_ADDR_VAR} to the address of node 0, reachable from every node}}"'


def supervised(line: str) -> str:
    """``line`` restarted while it exits with the guard's restart code (preempted, checkpointed)."""
    return (f"until {line}; do\n  code=$?\n  [ $code -eq {EXIT_RESTART} ] || exit $code\n"
            f"  echo \"gpuwise.guard: checkpointed and stopped (exit {EXIT_RESTART}), restarting\"\ndone")


def rdzv_env_lines(plan: LaunchPlan) -> list[str]:
    """The ``export`` of ``RDZV_ENV`` a block of several nodes runs before torchrun (none for one node)."""
    return [export_line(RDZV_ENV)] if plan.nodes > 1 else []


def export_line(env: dict[str, str]) -> str | None:
    """``export NAME=value …`` of ``env`` (None where it is empty)."""
    if not env:
        return None
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items())


def interpreter_check(python: str) -> str:
    """The line each node runs before the install check: where ``python`` (``launch_python``) is not a command
    on the node, the block stops with one line naming it, not with "gpuwise is not installed"."""
    why = (f"error: {python} is not a command on this node (torchrun and the command run with it): install it, "
           f'or name an interpreter this node has in --command (e.g. --command "python3 train.py")')
    return f"command -v {shlex.quote(python)} >/dev/null || {{ echo {shlex.quote(why)} >&2; exit 1; }}"


def install_line(wheel: Path | None, python: str = DEFAULT_PYTHON) -> str:
    """The line each node runs first: the lines start ``PY -m gpuwise.guard.torchrun`` (``python``) and no package
    registry serves gpuwise, so a node without it for ``python`` installs the wheel copied beside the command
    (``wheel``: :mod:`gpuwise.launch.wheel`, the running version) with that interpreter's pip, and stops with one
    clear line naming the interpreter where it cannot."""
    py = shlex.quote(python)
    if wheel is None:
        fix = f"install gpuwise for {python} on every node (pip install from its checkout, or a wheel of it)"
        return f"{py} -c 'import gpuwise' 2>/dev/null || {{ echo {shlex.quote('error: ' + fix)} >&2; exit 1; }}"
    fix = f"copy {wheel} to the working directory here, then {python} -m pip install ./{wheel.name}"
    return (f"{py} -c 'import gpuwise' 2>/dev/null || {py} -m pip install ./{shlex.quote(wheel.name)} "
            f"|| {{ echo {shlex.quote(f'error: gpuwise is not installed on this node for {python}: ' + fix)} >&2; "
            f"exit 1; }}")


def render_torchrun(plan: LaunchPlan, wheel: Path | None = None) -> str:
    """What ``gpuwise recommend --emit torchrun`` prints: a comment per node, then its lines: gpuwise installed
    from ``wheel`` where the node lacks it (``install_line``), the plan's environment and files, the command."""
    out = [f"# {plan.count}x {plan.gpu.name} from {plan.provider}: {plan.nodes} node(s) x {plan.gpus_per_node} GPU(s)",
           *plan.priced_lines]
    out += [f"# note: {n}" for n in plan.notes]
    needs_gpuwise = not plan.one_process      # a layer split runs the command itself, not the guard's torchrun
    python = launch_python(plan)
    if needs_gpuwise:
        out.append(f"# requires: {python} with gpuwise on every node (the lines run {python} -m {GUARD_TORCHRUN}); "
                   + (f"copy {wheel} (a wheel of this gpuwise) beside the command: the first line installs it"
                      if wheel is not None else "the first line checks it"))
    if plan.nodes > 1:
        out.append(f"# {plan.nodes} blocks, one per node: run each on its own machine (block 0 on node 0), not all on "
                   f"one; each needs MASTER_ADDR set to the address of node 0, reachable from every node, and stops "
                   f"without it; node 0 hosts torchrun's c10d rendezvous on port {RDZV_PORT}, which gives each node "
                   f"its rank and restarts every node's workers together")
    out.append(f"# each line starts the job again while it exits with {EXIT_RESTART} (the guard checkpointed "
               f"and stopped on preemption)" + ("; a node started again re-joins the job's rendezvous"
                                                 if plan.nodes > 1 else ""))
    export = export_line(plan.env)      # on every node: each block runs on its own machine
    files = write_files_lines(plan.files)   # the DeepSpeed config of a ZeRO plan, beside the command
    several = plan.nodes > 1
    for rank, line in enumerate(torchrun_lines(plan)):
        head = (f"# node {rank} of {plan.nodes}: run this block on node {rank}'s machine" if several
                else f"# node {rank}")
        checks = [interpreter_check(python), install_line(wheel, python)] if needs_gpuwise else []
        out += [head, *([master_addr_check()] if several else []), *checks,
                *([export] if export else []), *rdzv_env_lines(plan), *files, supervised(line)]
    return "\n".join(out) + "\n"
