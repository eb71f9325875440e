"""A SkyPilot task or SkyServe service keeps text as written: a script, argument or variable named in Chinese stays
readable in the YAML (PyYAML's default escaped every non-ASCII character and turned ``run`` into one double-quoted
line of ``\\uXXXX``), and SkyPilot still reads the same command from it."""

from __future__ import annotations

from types import SimpleNamespace

from gpuwise.launch import plan_launch
from gpuwise.launch.skypilot import render_skypilot



def _rendered(cat, tmp_path) -> str:
    wheel = tmp_path / "gpuwise-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    plan = plan_launch(SimpleNamespace(count=1, provider="runpod", spot=False), cat.gpu("rtx-4090"),
                       "FOO=数据 python 训练.py --name 实验一")
    return render_skypilot(plan, wheel)


def test_a_chinese_script_name_and_argument_stay_readable_in_the_run_block(cat, tmp_path):
    text = _rendered(cat, tmp_path)
    assert "\\u" not in text
    run = text[text.index("\nrun: |"):]
    assert "'训练.py' --name '实验一'" in run


def test_skypilot_reads_the_same_command_and_variable_from_the_unescaped_yaml(sky, cat, tmp_path):
    path = tmp_path / "task.yaml"
    path.write_text(_rendered(cat, tmp_path), encoding="utf-8")
    task = sky.Task.from_yaml(str(path))
    assert "'训练.py' --name '实验一'" in task.run
    assert task.envs["FOO"] == "数据"
