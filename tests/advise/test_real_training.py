"""Real curves: small models trained on CPU inside the test, logged through the run log, then advised."""

import pytest
import torch

from gpuwise.advise import AdviseSettings, NoiseScaleMeter, advise, grad_sq_norm, read_log
from gpuwise.runlog import RunLog


@pytest.fixture(autouse=True)
def one_torch_thread():
    # Tiny ops on a busy shared CPU: OpenMP threads spinning at barriers make each op 10x slower.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _train(path, *, lr: float, steps: int = 300, optimizer: str = "adam", seed: int = 0) -> None:
    """An MLP regressing a noisy teacher; each step = 2 micro-batches of 16 accumulated (batch 32), with
    the gradient noise scale measured from the micro-batch and step gradients, as gpuwise.guard would."""
    torch.manual_seed(seed)
    x = torch.randn(2048, 8)
    y = torch.sin(x @ torch.randn(8, 1)) + 0.1 * torch.randn(2048, 1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=lr) if optimizer == "adam" else torch.optim.SGD(params, lr=lr)
    meter = NoiseScaleMeter()
    with RunLog(path) as log:
        log.set_meta("gpu", "rtx-4090")
        for step in range(steps):
            idx = torch.randint(0, len(x), (32,))
            micro_grads, micro_sq, losses = [], [], []
            for part in idx.split(16):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x[part]), y[part])
                loss.backward()
                micro_sq.append(grad_sq_norm(params))
                micro_grads.append([p.grad.clone() for p in params])
                losses.append(float(loss.detach()))
            for p, *gs in zip(params, *micro_grads):
                p.grad = sum(gs) / len(gs)
            step_sq = grad_sq_norm(params)
            meter.update(micro_sq, 16, step_sq, 32)
            opt.step()
            log.log_train(step, loss=sum(losses) / 2, lr=lr, batch_size=32, micro_batch_size=16,
                          **NoiseScaleMeter.log_fields(sum(micro_sq) / 2, 16, step_sq, 32))


def test_a_learning_mlp_is_healthy_or_plateaued_with_a_noise_scale(tmp_path):
    path = tmp_path / "run.db"
    _train(path, lr=1e-2)
    report = advise(read_log(path), AdviseSettings(step_time_s=0.2))
    assert report.diagnosis in ("healthy", "plateau", "noisy")
    a = report.analysis
    assert a.current_trend_loss < 0.6 * a.trend[0]
    assert a.fit is not None and report.to_dict()["forecast"]["available"]
    ns = report.to_dict()["noise_scale"]
    assert ns is not None and ns["b_simple"] > 0 and ns["batch_size"] == 32
    assert any(x.kind == "batch_size" for x in report.advice)


def test_an_mlp_with_zero_learning_rate_is_not_learning(tmp_path):
    path = tmp_path / "run.db"
    _train(path, lr=0.0, steps=150)
    report = advise(read_log(path))
    assert report.diagnosis == "not_learning"
    assert "learning rate is 0" in next(x.text for x in report.advice if x.kind == "not_learning")


def test_an_mlp_with_a_huge_sgd_step_diverges(tmp_path):
    path = tmp_path / "run.db"
    _train(path, lr=3.0, steps=100, optimizer="sgd")
    report = advise(read_log(path))
    assert report.diagnosis == "diverged"
    assert report.analysis.nan_step is not None or report.analysis.divergence_step is not None
