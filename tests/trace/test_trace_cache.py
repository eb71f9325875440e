"""Speed without a different answer: a bad model name is refused before torch is imported, and a trace
is reused from the on-disk cache (keyed by workload, model source and versions) without importing torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuwise.trace import cache
from gpuwise.workload import Workload
from gpuwise.workload.specs import resolve_model_spec

SMALL = ["torchvision:resnet18", "--batch-size", "2", "--image-size", "64", "--gpu", "t4"]


def run_cli(args, env_extra, probe="") -> subprocess.CompletedProcess:
    """The real CLI in a fresh interpreter; prints 'torch imported: BOOL' on stderr at exit."""
    code = ("import sys, atexit\n"
            "atexit.register(lambda: print('torch imported:', 'torch' in sys.modules, file=sys.stderr))\n"
            f"from gpuwise.cli.app import main\nmain({list(args)!r})\n")
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture
def cache_on(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUWISE_CACHE_DIR", str(tmp_path / "traces"))
    monkeypatch.delenv("GPUWISE_NO_CACHE", raising=False)
    return {"GPUWISE_CACHE_DIR": str(tmp_path / "traces"), "GPUWISE_NO_CACHE": "0"}


@pytest.mark.parametrize("spec", ["torchvision:resnet5", "torchvision:resnet5O", "hf:bert-base-uncasd"])
def test_a_misspelt_model_is_refused_with_suggestions_before_torch_is_imported(spec):
    r = run_cli(["estimate", spec, "--gpu", "t4"], {})
    assert r.returncode == 2 and "did you mean" in r.stderr
    assert "torch imported: False" in r.stderr


def test_torchvision_names_are_checked_without_importing_torch():
    r = subprocess.run([sys.executable, "-c", "import sys\nfrom gpuwise.workload.specs import resolve_model_spec\n"
                        "print(resolve_model_spec('torchvision:resnet50').task, 'torch' in sys.modules)"],
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["image-classification", "False"], r.stderr


@pytest.mark.slow
def test_a_repeated_estimate_reads_the_cached_trace_gives_the_same_answer_and_never_imports_torch(cache_on):
    first = run_cli(["estimate", *SMALL, "--json"], cache_on)
    assert first.returncode == 0, first.stderr
    assert len(list((cache.cache_dir()).glob("*.pickle"))) == 1
    again = run_cli(["estimate", *SMALL, "--json"], cache_on)
    assert again.returncode == 0, again.stderr
    assert "torch imported: False" in again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout)


@pytest.mark.slow
def test_no_cache_traces_again_and_stores_nothing(cache_on):
    r = run_cli(["estimate", *SMALL, "--no-cache", "--json"], cache_on)
    assert r.returncode == 0, r.stderr
    assert "torch imported: True" in r.stderr
    assert not cache.cache_dir().exists() or not list(cache.cache_dir().glob("*.pickle"))


def test_the_key_changes_with_the_workload_and_the_models_config(tmp_path):
    base = Workload("torchvision:resnet18", batch_size=8)
    spec = resolve_model_spec(base.model)
    key = cache.trace_key(base, spec)
    assert key == cache.trace_key(Workload("torchvision:resnet18", batch_size=8), spec)
    assert key != cache.trace_key(base.with_(batch_size=16), spec)
    assert key != cache.trace_key(base.with_(precision="amp-bf16"), spec)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2}))
    hf = Workload(f"hf:{config}", batch_size=8)
    before = cache.trace_key(hf, resolve_model_spec(hf.model))
    config.write_text(json.dumps({"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 4}))
    assert cache.trace_key(hf, resolve_model_spec(hf.model)) != before


def test_a_damaged_entry_is_a_miss_and_is_removed(cache_on):
    cache.cache_dir().mkdir(parents=True)
    damaged = cache.cache_dir() / "0123abcd.pickle"
    damaged.write_bytes(b"not a pickle")
    assert cache.load("0123abcd") is None and not damaged.exists()


def test_the_cache_lives_in_the_users_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUWISE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "gpuwise" / "traces"
    monkeypatch.setenv("GPUWISE_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


@pytest.mark.slow
def test_the_shipped_torchvision_names_match_the_installed_torchvision():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
    from gen_torchvision_models import model_names

    from gpuwise.workload.specs import TORCHVISION_NAMES

    assert json.loads(TORCHVISION_NAMES.read_text()) == model_names(), \
        "run scripts/gen_torchvision_models.py after upgrading torchvision"


FACTORY = '''
import torch
from torch import nn
import trial_width

def factory(batch_size=2):
    return nn.Linear(trial_width.WIDTH, 8), (torch.empty(batch_size, trial_width.WIDTH),)
'''


def _trace_in_a_fresh_process(path, env_extra) -> int:
    code = ("from gpuwise.trace import trace_workload\nfrom gpuwise.workload import Workload\n"
            f"print(trace_workload(Workload({str(path) + ':factory'!r}, batch_size=2)).param_count)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **env_extra, "PYTHONPATH": str(path.parent)})
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1])


@pytest.mark.slow
def test_editing_a_module_the_factory_imports_traces_again(tmp_path, cache_on):
    # was: the key held the factory file's bytes only, so a width changed in the module it imports kept the old trace
    (tmp_path / "trial_width.py").write_text("WIDTH = 8\n")
    factory = tmp_path / "trial_model.py"
    factory.write_text(FACTORY)
    assert _trace_in_a_fresh_process(factory, cache_on) == 8 * 8 + 8
    assert _trace_in_a_fresh_process(factory, cache_on) == 8 * 8 + 8      # a hit: same answer
    (tmp_path / "trial_width.py").write_text("WIDTH = 32\n")
    assert _trace_in_a_fresh_process(factory, cache_on) == 32 * 8 + 8


def test_use_cache_false_traces_again_and_stores_nothing(tmp_path, cache_on):
    from gpuwise.trace import trace_workload
    (tmp_path / "plain.py").write_text("import torch\nfrom torch import nn\n"
                                       "def factory(batch_size=2):\n    return nn.Linear(4, 4), (torch.empty(batch_size, 4),)\n")
    trace_workload(Workload(f"{tmp_path / 'plain.py'}:factory", batch_size=2), use_cache=False)
    assert not cache.cache_dir().exists() or not list(cache.cache_dir().glob("*.pickle"))


def test_anything_but_a_workload_is_refused_in_one_line():
    from gpuwise.trace import TraceError, trace_workload
    with pytest.raises(TraceError, match="takes a gpuwise.workload.Workload"):
        trace_workload("torchvision:resnet18")


def test_user_sources_skip_installed_packages_the_asking_script_and_relative_names(tmp_path):
    import types

    def module(path):
        m = types.ModuleType("m")
        m.__file__ = str(path)
        return m

    mine = tmp_path / "mine.py"
    mine.write_text("X = 1\n")
    user_site = tmp_path / ".local" / "lib" / "python3.11" / "site-packages" / "dep.py"
    user_site.parent.mkdir(parents=True)
    user_site.write_text("Y = 2\n")
    script = tmp_path / "plan.py"
    script.write_text("Z = 3\n")
    found = cache.user_sources({"mine": module(mine), "dep": module(user_site), "__main__": module(script),
                                "torch.ops": module("_ops.py")})
    assert [path for path, _ in found] == [str(mine.resolve())]
