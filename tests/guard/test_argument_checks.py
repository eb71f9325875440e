"""Guard refuses numbers that would train wrongly or never save, and signals it cannot watch, in one GuardError
line naming the argument, before it creates anything (the checkpoint directory, signal handlers)."""

from __future__ import annotations

import signal

import pytest
import torch

from gpuwise.guard import Guard, GuardError, PreemptionHandler

from .helpers import tiny_model


@pytest.mark.parametrize("name, value", [
    ("clip_grad_norm", -1.0),      # torch's clip with a negative max_norm flips the gradients: training diverged
    ("clip_grad_norm", 0.0),       # zeroes every gradient
    ("clip_grad_norm", float("nan")),
    ("every_steps", -1),           # saved every step
    ("every_steps", 0),            # never saved periodically
    ("every_steps", 2.5),
    ("every_minutes", -5),         # saved every step
    ("every_minutes", 0),
    ("micro_batch_size", 0),       # ignored: the whole batch
    ("micro_batch_size", -4),
    ("grace_s", -1),
    ("max_save_failures", 0),
    ("min_free_checkpoints", -3),  # a negative count: never warned of a filling disk
    ("min_free_checkpoints", 1.5),
    ("exit_code", 300),            # an exit status is one byte: sys.exit(300) exits 44
    ("exit_code", -1),             # exits 255
    ("exit_code", 0),              # "done": a supervisor never restarts it
    ("exit_code", "x"),            # sys.exit("x") prints x and exits 1
    ("exit_code", True),
])
def test_a_bad_number_is_refused_in_one_line_naming_it(tmp_path, name, value):
    model = tiny_model()
    with pytest.raises(GuardError) as info:
        Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), verbose=False, **{name: value})
    message = str(info.value)
    assert message.startswith(f"{name} must be ") and message.endswith(f"got {value!r}") and "\n" not in message
    assert not (tmp_path / "ckpt").exists()  # refused before anything was created


@pytest.mark.parametrize("sig, said", [("SIGFOO", "unknown signal 'SIGFOO'"), (999, "unknown signal 999"),
                                       ("SIGKILL", "SIGKILL cannot be caught")])
def test_a_signal_that_cannot_be_watched_is_a_guard_error(tmp_path, sig, said):
    model = tiny_model()
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(GuardError, match=f"^preempt_signals: {said}$"):
        Guard(tmp_path / "ckpt", model, preempt_signals=("SIGTERM", sig), verbose=False)
    assert signal.getsignal(signal.SIGTERM) is before and not (tmp_path / "ckpt").exists()
    with pytest.raises(GuardError, match=said):
        PreemptionHandler([sig])


def test_valid_numbers_and_signal_names_are_accepted(tmp_path):
    model = tiny_model()
    guard = Guard(tmp_path / "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1), every_steps=5,
                  every_minutes=0.5, micro_batch_size=2, clip_grad_norm=1.0, grace_s=0,
                  preempt_signals=("SIGTERM", "usr1", signal.SIGINT), verbose=False)
    try:
        assert guard.preemption.signals == [signal.SIGTERM, signal.SIGUSR1, signal.SIGINT]
        assert guard.preemption.grace_s == 0  # no watchdog
    finally:
        guard.close()


@pytest.mark.parametrize("value", [300, -1, 0, "x", 75.0])
def test_the_callbacks_refuse_an_exit_code_that_is_not_one_byte(tmp_path, monkeypatch, value):
    from gpuwise.guard.integrations import hf, lightning

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(GuardError, match=r"^exit_code must be a whole number from 1 to 255 .*got "):
        hf.GuardCallback(exit_code=value)
    monkeypatch.setattr(lightning, "LIGHTNING_AVAILABLE", True)    # the check comes before Lightning is needed
    with pytest.raises(GuardError, match=r"^exit_code must be a whole number from 1 to 255 .*got "):
        lightning.GuardLightningCallback(tmp_path / "ckpt", exit_code=value)
    assert signal.getsignal(signal.SIGTERM) is before and not (tmp_path / "ckpt").exists()


def test_the_callbacks_accept_a_restart_code_of_their_choice(tmp_path):
    from gpuwise.guard.integrations import hf

    assert hf.GuardCallback(exit_code=143).preemption.exit_code == 143
