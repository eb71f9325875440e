"""A process that imports torch once and forks a fresh run of a script per request.

The kill test restarts the example more than 20 times; paying the 3-5 s torch import each time would
take minutes on this machine. A fork of an interpreter that has imported (but not used) torch starts in
milliseconds, and the child is a real, separate process that the test SIGKILLs like any other.

Protocol on stdin/stdout, one JSON object per line:
  -> {"script": path, "argv": [...], "stdout": path, "stderr": path}
  <- {"pid": N}            as soon as the child runs
  <- {"pid": N, "status": S}   when it ended (S: exit code, or -signal)
"""

from __future__ import annotations

import json
import os
import runpy
import sys

import torch  # noqa: F401  - the expensive imports, done once
import torch._dynamo  # noqa: F401  - imported lazily by the first optimizer step
import torch.nn.functional  # noqa: F401
import torch.optim  # noqa: F401

import gpuwise.guard  # noqa: F401


def _child(req: dict) -> None:
    out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.argv = [req["script"], *req["argv"]]
    code = 0
    try:
        runpy.run_path(req["script"], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        print(json.dumps({"pid": pid, "status": code}), flush=True)


if __name__ == "__main__":
    main()
