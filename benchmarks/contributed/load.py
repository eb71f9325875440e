#!/usr/bin/env python3
"""Read the contributed measurement rows in this folder (``*.jsonl``, one anonymous row a line, the format
of ``gpuwise calibrate LOG --export FILE``; see README.md) and print them as a table, or as JSON.

    python benchmarks/contributed/load.py            # the table
    python benchmarks/contributed/load.py --json     # every row, checked

A row that is not in the format stops the script naming its file and line: the folder holds only rows
that parse. ``gpuwise calibrate benchmarks/contributed/*.jsonl --gpu NAME`` fits the rows of one GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "src"))

from gpuwise.calibrate.errors import CalibrateError  # noqa: E402
from gpuwise.calibrate.export import read_rows  # noqa: E402


def load(folder: Path = HERE) -> list:
    """Every contributed measurement (``gpuwise.report.measured.Measurement``), file by file."""
    return [m for path in sorted(folder.glob("*.jsonl")) for m in read_rows(path)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folder", default=str(HERE))
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        rows = load(Path(args.folder))
    except CalibrateError as exc:
        print(f"load.py: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([m.to_dict() for m in rows], indent=1))
        return 0
    for m in rows:
        w = m.workload or {}
        step = f"{m.step_time_s * 1e3:9.2f} ms" if m.step_time_s else "        -   "
        print(f"{m.gpu_name or '?':28s} {w.get('model', '?'):32s} b{w.get('batch_size', '?'):<5} "
              f"{w.get('precision', '?'):9s} {step}  torch {m.torch_version or '?'}")
    print(f"{len(rows)} row(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
