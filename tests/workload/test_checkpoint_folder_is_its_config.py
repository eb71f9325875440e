"""A model given as a checkpoint's folder (`hf:path/to/checkpoint`, a config.json inside) is the same model as its
config file everywhere: the tracer read the folder, but the LLM closed form's lookup took only `.json` paths, so
`--request-rate` (serving, the closed form) refused `hf:awq` as "not a decoder LLM" while `hf:awq/config.json`
ran."""

from __future__ import annotations

import json

from gpuwise.workload.llm_config import config_path_for
from gpuwise.workload.specs import CONFIG_DIR

QWEN = CONFIG_DIR / "Qwen--Qwen2.5-0.5B.json"


def test_a_checkpoint_folder_is_read_as_its_config_file(tmp_path, monkeypatch, cli_json):
    folder = tmp_path / "my-qwen"
    folder.mkdir()
    (folder / "config.json").write_text(QWEN.read_text())
    monkeypatch.chdir(tmp_path)
    assert config_path_for("hf:my-qwen").resolve() == folder / "config.json"
    assert config_path_for(f"hf:{folder}") == folder / "config.json"
    by_folder = cli_json(["estimate", "hf:my-qwen", "--mode", "infer", "--engine", "vllm", "--request-rate", "2",
                          "--max-new-tokens", "64", "--gpu", "rtx-4090", "--json"])
    by_file = cli_json(["estimate", "hf:my-qwen/config.json", "--mode", "infer", "--engine", "vllm",
                        "--request-rate", "2", "--max-new-tokens", "64", "--gpu", "rtx-4090", "--json"])
    assert by_folder["memory"]["total_bytes"] == by_file["memory"]["total_bytes"]
    assert json.dumps(by_folder["time"], sort_keys=True) == json.dumps(by_file["time"], sort_keys=True)
