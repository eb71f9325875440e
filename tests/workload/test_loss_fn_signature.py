"""A factory's loss_fn takes the model's outputs alone (docs/trace.md). One written as ``loss_fn(out, batch)`` was
reported as "tracing ... failed in module '<top>' during forward: TypeError: <lambda>() missing 1 required
positional argument: 'batch'", gpuwise's failure in the wrong phase; it is refused before tracing, naming its
signature and what to do."""

from __future__ import annotations

import textwrap

FACTORIES = textwrap.dedent('''
    import torch, torch.nn as nn

    def two(batch_size=4):
        return nn.Linear(16, 4), (torch.empty(batch_size, 16),), lambda out, batch: out.pow(2).mean()

    def one(batch_size=4):
        return nn.Linear(16, 4), (torch.empty(batch_size, 16),), lambda out: out.pow(2).mean()

    def optional_target(batch_size=4):
        def loss(out, target=None):
            return out.pow(2).mean()
        return nn.Linear(16, 4), (torch.empty(batch_size, 16),), loss
''')


def test_a_loss_fn_that_needs_more_than_the_outputs_is_refused_in_one_line(cli_run, tmp_path):
    (tmp_path / "m.py").write_text(FACTORIES)
    code, out, err = cli_run("estimate", f"{tmp_path / 'm.py'}:two", "--no-cache", "--gpu", "a10")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and not out and len(lines) == 1, err
    assert "the loss_fn takes the model's outputs alone" in lines[0] and "(out, batch)" in lines[0]
    assert "tracing" not in lines[0]


def test_a_loss_fn_of_the_outputs_alone_traces(cli_run, tmp_path):
    (tmp_path / "m.py").write_text(FACTORIES)
    for factory in ("one", "optional_target"):
        code, out, err = cli_run("estimate", f"{tmp_path / 'm.py'}:{factory}", "--no-cache", "--gpu", "a10")
        assert code == 0, err
        assert "Step time" in out
