"""Writes src/gpuwise/workload/torchvision_models.json: torchvision's model names by task, for this version.

gpuwise checks a `torchvision:NAME` spec against this list without importing torch (seconds saved on
every typo). Run it after upgrading torchvision; tests/workload/test_torchvision_names.py checks that
the list matches the installed torchvision.

    .venv/bin/python scripts/gen_torchvision_models.py
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "gpuwise" / "workload" / "torchvision_models.json"


def model_names() -> dict:
    import torchvision.models as tvm

    classification = sorted(tvm.list_models(module=tvm))
    segmentation = sorted(tvm.list_models(module=tvm.segmentation))
    other = sorted(set(tvm.list_models()) - set(classification) - set(segmentation))
    return {"torchvision": version("torchvision"), "classification": classification,
            "segmentation": segmentation, "other": other}


def main() -> None:
    OUT.write_text(json.dumps(model_names(), indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
