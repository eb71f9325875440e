"""timm names are checked from an index kept per timm version: no import of timm after the first time."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

CHECK = """
import sys
from gpuwise.workload.model import WorkloadError
from gpuwise.workload.specs import resolve_model_spec
try:
    resolve_model_spec("timm:resnet5")
except WorkloadError as e:
    print("refused:", e)
print("side:", resolve_model_spec("timm:vit_wide_384").default_image_size())
print("timm imported:", "timm" in sys.modules)
"""


def _run(code: str, cache) -> str:
    env = {"XDG_CACHE_HOME": str(cache), "PATH": "/usr/bin:/bin", "HOME": str(cache), "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_typo_and_an_image_side_are_answered_from_the_index_without_importing_timm(tmp_path):
    # before: every timm: name imported timm to check it (12 s for a typo; a cached estimate never hit)
    index = tmp_path / "gpuwise" / "timm" / f"models-{version('timm')}.json"
    index.parent.mkdir(parents=True)
    index.write_text(json.dumps({"timm": version("timm"), "models": {"resnet50": 224, "vit_wide_384": 384}}))
    out = _run(CHECK, tmp_path)
    assert "refused: unknown timm model 'resnet5' (did you mean: timm:resnet50" in out      # pasted back as is
    assert "side: 384" in out and "timm imported: False" in out


def test_the_index_is_built_from_the_installed_timm_once():
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        built = _run("from gpuwise.workload.timm_index import timm_models; import sys, timm; "
                     "m = timm_models(); print(m['resnet50'], m['vit_base_patch16_384'], "
                     "set(m) == set(timm.list_models()))", cache)
        assert built.split() == ["224", "384", "True"]
        again = _run("import sys; from gpuwise.workload.timm_index import timm_models; "
                     "print(timm_models()['resnet50'], 'timm' in sys.modules)", cache)
        assert again.split() == ["224", "False"]
