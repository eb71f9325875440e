"""The SkyPilot loop's run logs carry the node rank again, and each start gets one of its own (review finding):
after the loop dropped ``--log gpuwise-run-$SKYPILOT_NODE_RANK.db`` (which every restart wrote into), the logs of
the nodes of a multi-node job were told apart by nothing but their time. Now each start passes ``--log`` with
the node rank and the start's number, created fresh by ``gpuwise run``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from types import SimpleNamespace

from gpuwise.launch import plan_launch
from gpuwise.launch.skypilot import skypilot_task
from gpuwise.runlog import read_meta


def test_each_start_on_each_node_writes_a_log_named_by_rank_and_start(cat, tmp_path):
    option = SimpleNamespace(count=1, provider="lambda", spot=False, batch_size=1, grad_accum_steps=1)
    run = skypilot_task(plan_launch(option, cat.gpu("rtx-a6000"), "python train.py"), tmp_path / "gpuwise.whl")["run"]
    assert "--log" in run
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gpuwise").write_text(f"#!/bin/sh\nexec {sys.executable} -m gpuwise.cli.app \"$@\"\n")
    (bin_dir / "gpuwise").chmod(0o755)
    # the torchrun wrapper: preempted (75) twice, then done
    (bin_dir / "python").write_text("#!/bin/sh\necho start >> starts\n[ $(wc -l < starts) -lt 3 ] && exit 75\nexit 0\n")
    (bin_dir / "python").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "GPUWISE_MONITOR_BACKEND"}
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", SKYPILOT_NODE_RANK="3", SKYPILOT_NUM_GPUS_PER_NODE="1")
    done = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    logs = sorted(tmp_path.glob("gpuwise-run-*.db"))
    names = [p.name for p in logs]
    assert len(logs) == 3, names
    assert all(re.fullmatch(r"gpuwise-run-node3-start[123]-\d{8}-\d{6}\.db", n) for n in names), names
    by_start = {int(re.search(r"start(\d)", p.name).group(1)): read_meta(p)["exit_code"] for p in logs}
    assert by_start == {1: "75", 2: "75", 3: "0"}
