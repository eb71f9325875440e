"""The --command a launch runs, read before any tracing, as torchrun and SkyPilot will run it.

A new user's trial of `recommend ... --emit torchrun|skypilot --command ...`: an unbalanced quote crashed with a
traceback after tracing; `python -u train.py` emitted `--no-python -u train.py` (torchrun: unrecognized arguments:
-u); `python train.py; echo done` emitted `--no-python 'train.py;' echo done`; `FOO=1 python train.py` tried to exec
`FOO=1`; `torchrun train.py` ran torchrun inside torchrun; `python -m` emitted `--module` with no module; and HF
generate's layer split over 2 GPUs was emitted as `--nproc-per-node=2` (two processes, each loading the whole model).
"""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pytest

from gpuwise.launch import parse_command, plan_launch, render
from gpuwise.launch.plan import LaunchError
from gpuwise.launch.skypilot import skypilot_task
from gpuwise.launch.torchrun import launcher, torchrun_lines
from gpuwise.launch.wheel import build_wheel

RESNET = ("recommend", "torchvision:resnet18", "--steps", "10", "--provider", "runpod", "--emit", "torchrun")


def _option(count=1, provider="runpod"):
    return SimpleNamespace(count=count, provider=provider, spot=False)


def _worker(plan) -> list[str]:
    """What torchrun runs after its own options, from the emitted line parsed as the shell will."""
    (line,) = torchrun_lines(plan)
    argv = shlex.split(line)
    assert tuple(argv[:3]) == launcher(plan)
    return argv[next(i for i, a in enumerate(argv) if a.startswith("--max-restarts=")) + 1:]


@pytest.fixture
def no_tracing(monkeypatch):
    """Tracing fails the test: a refusal must come before it."""
    import gpuwise.plan

    def traced(*_a, **_k):
        raise AssertionError("traced before refusing the command")

    monkeypatch.setattr(gpuwise.plan, "model_for", traced)


@pytest.mark.parametrize("command, said", [
    ("python 'unbalanced", "no closing quotation"),
    ("python train.py; echo done", "';'"),
    ("cd src && python train.py", "'&&'"),
    ("python train.py || true", "'||'"),
    ("python train.py | tee log", "'|'"),
    ("python train.py > log", "'>'"),
    ("python train.py < input", "'<'"),
    ("python train.py --tag `date`", "'`'"),
    ("python train.py --tag \"$(date)\"", "'$('"),
    ("python -m", "no script or module in --command"),
    ("python", "no script or module in --command"),
    ("python -u", "no script or module in --command"),
    ("torchrun --nproc-per-node 2 train.py --lr 1", "--command 'python train.py --lr 1'"),
    ("deepspeed train.py --deepspeed ds.json", "--command 'python train.py --deepspeed ds.json'"),
    ("accelerate launch train.py", "--command 'python train.py'"),
    ("python -m torch.distributed.run --nproc-per-node 2 train.py", "--command 'python train.py'"),
])
def test_a_command_the_launch_cannot_run_is_refused_in_one_line_before_tracing(cli_run, no_tracing, command, said):
    code, out, err = cli_run(*RESNET, "--command", command)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and said in lines[0], err


def test_shell_characters_inside_quotes_are_arguments_not_syntax():
    command = parse_command("python train.py --sep ';' --pattern 'a|b' -c \"x > 1\"")
    assert command.argv == ("python", "train.py", "--sep", ";", "--pattern", "a|b", "-c", "x > 1")


@pytest.mark.parametrize("command, worker", [
    ("python -u train.py --lr 1e-4", ["--no-python", "python", "-u", "train.py", "--lr", "1e-4"]),
    ('python -c "print(1)"', ["--no-python", "python", "-c", "print(1)"]),
    ("python -X dev -W ignore train.py", ["--no-python", "python", "-X", "dev", "-W", "ignore", "train.py"]),
    ("python3 -u -m pkg.train --x 1", ["--no-python", "python3", "-u", "-m", "pkg.train", "--x", "1"]),
    ("python -m pkg.train --x 1", ["--module", "pkg.train", "--x", "1"]),
    ("python train.py --lr 1", ["train.py", "--lr", "1"]),
])
def test_a_python_s_own_options_stay_with_the_python_that_reads_them(cat, command, worker):
    plan = plan_launch(_option(), cat.gpu("rtx-a5000"), command)
    assert _worker(plan) == worker


def test_an_environment_prefix_moves_into_the_launch_s_environment(sky, cat, tmp_path):
    command = "FOO=1 BAR='a b' python train.py --lr 1"
    plan = plan_launch(_option(), cat.gpu("rtx-a5000"), command)
    assert _worker(plan) == ["train.py", "--lr", "1"]
    text = render(plan, "torchrun")
    export = next(line for line in text.splitlines() if line.startswith("export "))
    assert dict(w.split("=", 1) for w in shlex.split(export)[1:]) == {**plan.env, "FOO": "1", "BAR": "a b"}
    path = tmp_path / "task.yaml"
    path.write_text(render(plan, "skypilot", wheel=build_wheel()))
    task = sky.Task.from_yaml(str(path))
    assert task.envs["FOO"] == "1" and task.envs["BAR"] == "a b"
    assert "FOO=1" not in task.run


def test_a_layer_split_runs_one_process_that_sees_every_gpu(sky, cat, tmp_path):
    plan = plan_launch(_option(count=2), cat.gpu("h100-sxm"), "python serve.py --port 8000", one_process=True)
    (line,) = torchrun_lines(plan)
    assert shlex.split(line) == ["python", "serve.py", "--port", "8000"]
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert any("layer split" in note and "not under torchrun" in note for note in plan.notes)
    path = tmp_path / "task.yaml"
    path.write_text(render(plan, "skypilot", wheel=build_wheel()))
    task = sky.Task.from_yaml(str(path))
    (res,) = task.resources
    assert res.accelerators == {"H100-SXM": 2} and task.envs["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "gpuwise.guard.torchrun" not in task.run and "-- python serve.py --port 8000;" in task.run


@pytest.mark.slow
def test_recommend_emits_hf_generate_s_layer_split_as_one_process(cli_run):
    args = ("recommend", "hf:meta-llama/Llama-3.1-70B", "--mode", "infer", "--seq-len", "1024", "--max-new-tokens",
            "128", "--batch-size", "8", "--steps", "100", "--provider", "runpod", "--gpus", "h100-sxm", "--emit",
            "torchrun", "--command", "python serve.py")
    code, out, err = cli_run(*args, "--json")
    assert code == 0, err
    answer = json.loads(out)
    count, launch = answer["best"]["count"], answer["launch"]
    assert count > 1 and launch["count"] == count
    assert launch["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, range(count)))
    lines = [line for line in launch["text"].splitlines() if line.startswith("until ")]
    assert [shlex.split(line[len("until "):].split(";")[0]) for line in lines] == [["python", "serve.py"]]
    assert f"on the model split over {count} GPUs" in launch["notes"][0]


def test_a_serving_batch_on_one_gpu_is_not_split_over_one_gpus():
    from gpuwise.launch import BatchSplit

    split = BatchSplit.of(SimpleNamespace(batch_size=8, count=1), training=False, per_gpu=False)
    assert "on the one GPU" in split.note() and "1 GPUs" not in split.note()
