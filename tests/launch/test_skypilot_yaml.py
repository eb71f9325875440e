"""The SkyPilot task YAML of a chosen option, parsed by SkyPilot itself (no cloud credentials needed)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuwise.launch import plan_launch, render
from gpuwise.launch.plan import LaunchError
from gpuwise.launch.skypilot import render_skypilot, skypilot_task
from gpuwise.launch.wheel import build_wheel

COMMAND = "python train.py --checkpoint-dir ckpt --steps 1000"


def _parse(sky, text: str, tmp_path):
    path = tmp_path / "task.yaml"
    path.write_text(text)
    return sky.Task.from_yaml(str(path))


def _option(count, provider, spot=False):
    return SimpleNamespace(count=count, provider=provider, spot=spot)


@pytest.mark.parametrize("gpu, count, provider, spot, accelerator, cloud, region, nodes", [
    ("h100-sxm", 8, "aws", False, "H100", "AWS", "us-east-1", 1),
    ("h100-sxm", 16, "aws", True, "H100", "AWS", "us-east-1", 2),
    ("a100-80gb-sxm4", 8, "runpod", False, "A100-80GB-SXM", "RunPod", None, 1),
    ("rtx-a6000", 1, "lambda", False, "A6000", "Lambda", "us-east-1", 1),
    ("a100-40gb-sxm4", 8, "gcp", True, "A100", "GCP", "us-central1", 1),
])
def test_emitted_yaml_parses_with_skypilot_and_names_the_gpu_count_spot_and_cloud(
        sky, cat, tmp_path, gpu, count, provider, spot, accelerator, cloud, region, nodes):
    plan = plan_launch(_option(count, provider, spot), cat.gpu(gpu), COMMAND)
    task = _parse(sky, render(plan, "skypilot"), tmp_path)
    assert task.num_nodes == nodes
    (res,) = task.resources
    assert res.accelerators == {accelerator: count // nodes}
    assert res.use_spot is spot
    assert type(res.cloud).__name__ == cloud and res.region == region
    assert "torchrun" in task.run and "train.py --checkpoint-dir ckpt --steps 1000" in task.run
    assert "gpuwise run" in task.run and "-eq 75" in task.run
    if nodes > 1:
        assert "--rdzv-id=$SKYPILOT_TASK_ID" in task.run and "is_host=$((SKYPILOT_NODE_RANK==0))" in task.run
        assert "SKYPILOT_NODE_IPS" in task.run


def test_a_provider_skypilot_does_not_know_says_so_and_still_gives_torchrun_lines(cat):
    plan = plan_launch(_option(2, "autodl"), cat.gpu("rtx-4090"), COMMAND)
    text = render(plan, "skypilot")
    assert "SkyPilot does not know the provider 'autodl'" in text
    assert "torchrun --standalone --nproc-per-node=2" in text
    with pytest.raises(LaunchError, match="autodl"):
        skypilot_task(plan, Path("gpuwise.whl"))
    with pytest.raises(LaunchError):
        render_skypilot(plan, Path("gpuwise.whl"))


def test_launching_needs_an_option_and_a_command(cat):
    with pytest.raises(LaunchError, match="nothing to launch"):
        plan_launch(None, cat.gpu("t4"), COMMAND)
    with pytest.raises(LaunchError, match="--command"):
        plan_launch(_option(1, "aws"), cat.gpu("t4"), "  ")


@pytest.mark.slow
def test_recommend_emit_skypilot_prints_a_task_for_the_best_option(sky, tmp_path, capsys):
    from gpuwise.cli.app import main

    model = f"{Path(__file__).resolve().parents[1] / 'memory' / 'tiny_models.py'}:transformer"
    args = ["recommend", model, "--seq-len", "16", "--batch-size", "8", "--steps", "100", "--provider", "aws",
            "--gpus", "t4,h100-sxm", "--no-remedies", "--emit", "skypilot", "--command", COMMAND]
    with pytest.raises(SystemExit) as done:
        main(args)
    out = capsys.readouterr().out
    assert done.value.code in (0, None)
    with pytest.raises(SystemExit):
        main([*args, "--json"])
    best = json.loads(capsys.readouterr().out)["best"]
    task = _parse(sky, out, tmp_path)
    (res,) = task.resources
    assert res.accelerators == {"T4" if best["gpu"] == "t4" else "H100": best["count"]}


def test_emit_without_a_command_is_refused_before_any_tracing(capsys):
    from gpuwise.cli.app import main

    with pytest.raises(SystemExit) as done:
        main(["recommend", "torchvision:resnet18", "--emit", "skypilot"])
    assert done.value.code == 2 and "--command" in capsys.readouterr().err


def test_setup_installs_the_job_s_requirements_and_the_uploaded_wheel_of_this_gpuwise(sky, cat, tmp_path):
    # before: setup ran `pip install 'gpuwise==0.1.0'`, which no package registry serves
    import subprocess

    plan = plan_launch(_option(1, "lambda"), cat.gpu("rtx-a6000"), COMMAND)
    wheel = build_wheel(tmp_path / "wheels")
    task = _parse(sky, render(plan, "skypilot", wheel=wheel), tmp_path)
    assert "gpuwise==" not in task.setup and "requirements.txt" in task.setup
    ((remote, local),) = task.file_mounts.items()
    assert local == str(wheel) and Path(local).is_file()
    # the script runs: with no requirements.txt, the conditional is skipped (pip replaced by echo)
    script = task.setup.replace("pip install", "echo pip install")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert out.strip() == f"pip install {remote}".replace("~", str(Path.home()), 1)


def test_the_wheel_installs_with_pip_and_runs_this_gpuwise(tmp_path):
    import subprocess
    import sys

    wheel = build_wheel(tmp_path / "wheels")
    assert build_wheel(tmp_path / "wheels") == wheel            # same code, same file: built once
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(target), str(wheel)], check=True, capture_output=True, timeout=300)
    assert (target / "bin" / "gpuwise").is_file()                  # the console script from entry_points
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", "import gpuwise.cli.app as a, gpuwise; print(gpuwise.__file__); "
                           "a.main(['gpus', 't4', '--json'])"], capture_output=True, text=True, env=env, timeout=120)
    path, _, out = done.stdout.partition("\n")
    assert path.startswith(str(target)), path                       # the installed copy, not the checkout
    assert json.loads(out)["gpus"][0]["id"] == "t4", done.stderr[-2000:]


@pytest.mark.parametrize("spot, command", [(True, "sky jobs launch"), (False, "sky launch -c gpuwise")])
def test_a_spot_option_is_launched_as_a_managed_job_that_survives_preemption(sky, cat, tmp_path, spot, command):
    # before: spot options were started with `sky launch`, which does not relaunch a preempted cluster
    plan = plan_launch(_option(8, "aws", spot), cat.gpu("h100-sxm"), COMMAND)
    text = render(plan, "skypilot", wheel=build_wheel(tmp_path / "wheels"))
    assert text.splitlines()[0].endswith(f": {command} <this file>")
    assert ("outlives it" in text) is spot
    assert _parse(sky, text, tmp_path).resources.pop().use_spot is spot


def test_a_variant_of_a_known_gpu_is_rented_as_its_base(tmp_path):
    # "no SkyPilot accelerator name known for GPU 'a100-4box'": a based_on variant (the same chip in machines of
    # 4) could not be launched on a cloud that rents its base
    from gpuwise.catalog import load_catalog

    path = tmp_path / "mine.toml"
    path.write_text('[[gpu]]\nid = "a100-4box"\nbased_on = "a100-80gb-sxm4"\ngpus_per_node = 4\n')
    gpu = load_catalog(path, user_file=False).gpu("a100-4box")
    assert gpu.based_on == "a100-80gb-sxm4"
    task = skypilot_task(plan_launch(_option(8, "aws"), gpu, COMMAND), Path("gpuwise.whl"))
    assert task["resources"]["accelerators"] == "A100-80GB:4" and task["num_nodes"] == 2
