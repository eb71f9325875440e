"""Re-runs every ```console block of README.md (or another page: docs/tour.md, docs/llm.md) whose command is
`$ gpuwise ...` and pastes the real output under it, at 80 columns as a pipe gets it, so the page shows what
the commands print today. What a command says on stderr (its warnings) comes first, where a terminal shows it.

    .venv/bin/python scripts/refresh_readme.py [README.md | docs/tour.md | docs/llm.md]

A command may go on over several lines ending in ``\``. Blocks whose command ends with `# no-refresh`
are left alone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```console\n\$ (?P<cmd>(?:[^\n]*\\\n)*[^\n]+)\n(?P<body>.*?)```", re.S)
COLUMNS = "80"


def run(cmd: str) -> str:
    env = {**os.environ, "COLUMNS": COLUMNS, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}",
           "NO_COLOR": "1", "TERM": "dumb"}
    r = subprocess.run(cmd, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = (r.stderr + r.stdout).rstrip()     # the warnings are said before the answer is printed
    lines = [line.rstrip() for line in out.splitlines()]
    return "\n".join(lines) + "\n"


def refresh(text: str) -> str:
    def replace(m: re.Match) -> str:
        cmd = m.group("cmd")
        if cmd.endswith("# no-refresh") or not re.match(r"(\w+=\S+\s+)*gpuwise\b", cmd):
            return m.group(0)
        print(f"running: {cmd}", file=sys.stderr)
        return f"```console\n$ {cmd}\n{run(cmd)}```"

    return BLOCK.sub(replace, text)


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "README.md")
    path.write_text(refresh(path.read_text()))
