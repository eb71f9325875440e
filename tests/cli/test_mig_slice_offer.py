"""A MIG slice can be priced in a catalog file (by any name `gpus` resolves) and then recommended, one slice at a
time: a process sees one slice, so its price is not multiplied into 2, 4 or 8 "GPUs"."""

from __future__ import annotations

OFFER = """
[[offer]]
provider = "lab"
gpu = "{gpu}"
price_per_hour = 1.0
currency = "CNY"
source = "our MIG partition's charge-back"
checked = "2026-12-01"
"""
SLICE = "a100-40gb-sxm4-mig-3g.20gb"


def test_recommend_quotes_a_mig_slice_priced_in_your_file(tmp_path, cli_json):
    # before: the loader refused gpu = "a100-40gb-sxm4-mig-3g.20gb" ("unknown GPU ... did you mean"), so recommend
    # could only advise adding an [[offer]] that could not be added
    (tmp_path / "mig.toml").write_text(OFFER.format(gpu=SLICE))
    answer = cli_json(["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "256", "--steps", "100",
                       "--gpus", "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "--catalog", str(tmp_path / "mig.toml"),
                       "--no-remedies", "--json"])
    assert [(o["gpu"], o["count"], o["provider"], o["own_price"]) for o in answer["options"]] == [
        (SLICE, 1, "lab", True)]
