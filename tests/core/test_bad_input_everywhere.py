"""Bad input that used to slip through: configs that are not configs, a factory that exits, a currency no
rate exists for, option values out of range. Each exits 2 with one line (or raises the part's error)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.catalog.model import CatalogError
from gpuwise.workload import WorkloadError
from gpuwise.workload.config_checks import check_config
from gpuwise.workload.specs import resolve_model_spec

BERT = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 128}


@pytest.mark.parametrize("config, problem", [
    ([BERT], "JSON object, not a list"),
    ({**BERT, "hidden_size": -64}, "hidden_size is '-64'"),
    ({**BERT, "hidden_size": float("nan")}, "hidden_size is 'nan'"),
    ({**BERT, "layer_norm_eps": float("nan")}, "layer_norm_eps is nan, not a finite number"),
    ({**BERT, "num_hidden_layers": 2.5}, "num_hidden_layers is '2.5'"),
    ({**BERT, "text_config": {"hidden_size": 0}}, "text_config.hidden_size is '0'"),
    ({**BERT, "num_hidden_layers": 10**9}, "num_hidden_layers is '1000000000', not a whole number from 1 to 4,096"),
    ({**BERT, "vocab_size": 10**8}, "vocab_size is '100000000', not a whole number from 1 to 2,000,000"),
    ({**BERT, "text_config": {"intermediate_size": [128, 10**7]}}, r"text_config.intermediate_size\[1\] is '10000000'"),
], ids=["list", "negative-hidden", "nan-hidden", "nan-anywhere", "fraction", "nested-zero", "layers-1e9", "vocab-1e8",
        "per-layer-ffn-1e7"])
def test_a_config_that_cannot_describe_a_model_is_refused(tmp_path, config, problem):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))  # json writes NaN, and Python's json reads it back
    with pytest.raises(WorkloadError, match=problem):
        check_config(json.loads(path.read_text()), str(path))
    if isinstance(config, dict):  # the traced path (hf:config.json) checks before building anything
        with pytest.raises(WorkloadError, match=problem):
            resolve_model_spec(f"hf:{path}")


@pytest.mark.parametrize("config, problem", [
    ([{"model_type": "qwen2"}], "a model config is a JSON object, not a list"),
    ({"hidden_size": -896}, "hidden_size is '-896'"),
    ({"hidden_size": float("nan")}, "hidden_size is 'nan'"),
    ({"num_hidden_layers": 10**9}, "num_hidden_layers is '1000000000', not a whole number from 1 to 4,096"),
], ids=["list", "negative-hidden", "nan-hidden", "layers-1e9"])
def test_estimate_on_a_bad_config_exits_2_with_one_line(tmp_path, config, problem):
    from gpuwise.workload.specs import CONFIG_DIR

    if isinstance(config, dict):  # a real decoder LLM's config with one size broken
        config = {**json.loads((CONFIG_DIR / "Qwen--Qwen2-0.5B.json").read_text()), **config}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    done = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", f"hf:{path}", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stdout == "", (done.stdout[-300:], done.stderr[-800:])
    assert len(done.stderr.strip().splitlines()) == 1 and problem in done.stderr


def test_every_shipped_config_passes_the_checks():
    from gpuwise.workload.specs import _shipped_configs

    for path in _shipped_configs().values():
        check_config(json.loads(path.read_text()), str(path))


def test_a_factory_that_calls_sys_exit_is_bad_input(tmp_path):
    from gpuwise.workload import Workload

    model_file = tmp_path / "model.py"
    model_file.write_text("import sys\ndef make():\n    sys.exit(0)\n")
    spec = f"{model_file}:make"
    with pytest.raises(WorkloadError, match=r"model factory model.py:make raised SystemExit: 0"):
        resolve_model_spec(spec).build(Workload(model=spec, batch_size=2))


def test_a_catalog_currency_without_an_exchange_rate_is_refused_at_load(tmp_path):
    user = tmp_path / "mine.toml"
    user.write_text('[[offer]]\nprovider = "mylab"\ngpu = "t4"\nprice_per_hour = 0.9\ncurrency = "ZZZ"\n'
                    'source = "invoice"\nchecked = "2026-12-01"\n')
    with pytest.raises(CatalogError, match="'ZZZ' has no exchange rate; known currencies: CNY, EUR"):
        load_catalog(user, user_file=False)


@pytest.mark.parametrize("args, option", [
    (["recommend", "timm:resnet18", "--batch-size", "0"], "--batch-size"),
    (["recommend", "timm:resnet18", "--batch-size", "-4"], "--batch-size"),
    (["recommend", "timm:resnet18", "--batch-size", "auto", "--effective-batch", "0"], "--effective-batch"),
    (["estimate", "timm:resnet18", "--batch-size", "0"], "--batch-size"),
], ids=["recommend-batch-0", "recommend-batch-negative", "effective-batch-0", "estimate-batch-0"])
def test_batch_options_below_one_exit_2_with_one_line(args, option):
    done = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", *args, "--json"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, (done.stdout[-300:], done.stderr[-500:])
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1 and option in done.stderr
