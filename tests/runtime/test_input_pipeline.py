"""--cpu-workers: the input rate JPEG-decoding DataLoader workers deliver (measured per-image cost on one
core, benchmarks/input_pipeline.py), and a warning when a vision job on synthetic data would need more
decoding cores than a rented GPU comes with."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from gpuwise.runtime import predict_step_time
from gpuwise.runtime.input_pipeline import CORES_PER_RENTED_GPU, cores_to_feed, decode_cost, workers_rate
from gpuwise.runtime.stack import Stack
from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.specs import feeds_images, image_side
from runtime_fakes import a100_like
from test_runtime_stack import cnn_trace


def test_the_measured_cost_is_a_few_milliseconds_an_image_and_grows_with_the_output_side():
    for training in (True, False):
        cost = decode_cost(training)
        assert 1e-3 < cost.per_image_s(224) < 50e-3          # PIL decode of a 500 x 375 JPEG + transforms
        assert cost.per_image_s(384) > cost.per_image_s(224) > cost.per_image_s(128)


def test_workers_set_a_rate_in_proportion_and_cores_to_feed_is_its_inverse():
    assert workers_rate(16, 224, True) == pytest.approx(2 * workers_rate(8, 224, True))
    assert workers_rate(8, None, True) == workers_rate(8, 224, True)           # torchvision's default side
    assert cores_to_feed(workers_rate(8, 224, True), 224, True) == pytest.approx(8)
    stack = Stack.from_workload(Workload(model="torchvision:resnet50", cpu_workers=8))
    assert stack.input_rate == pytest.approx(workers_rate(8, 224, True))
    assert "8 CPU workers decoding JPEGs" in stack.describe()
    # a measured rate is taken as given
    assert Stack.from_workload(Workload(model="torchvision:resnet50", input_rate=123.0)).input_rate == 123.0


def test_bad_or_conflicting_worker_settings_are_refused_or_named():
    with pytest.raises(WorkloadError, match="cpu-workers"):
        Workload(model="torchvision:resnet50", cpu_workers=0)
    with pytest.raises(WorkloadError, match="not both"):
        Workload(model="torchvision:resnet50", cpu_workers=4, input_rate=100.0)
    text_model = Workload(model="hf:bert-base-uncased", cpu_workers=4)
    assert any("--cpu-workers" in s for s in text_model.inert_settings())
    # the rule that names it inert is the rule that applies it: no JPEG-decoding rate for a text model
    assert Stack.from_workload(text_model).input_rate is None
    hub_vit = Workload(model="hf:google/vit-base-patch16-224", cpu_workers=4, image_size=224)
    assert not hub_vit.inert_settings() and Stack.from_workload(hub_vit).input_rate == workers_rate(4, 224, True)
    assert not Workload(model="torchvision:resnet50", cpu_workers=4).inert_settings()
    assert feeds_images(Workload(model="timm:vit_base_patch16_224")) and not feeds_images(text_model)
    # --image-size does not make a text model's samples images (it read BERT as fed by JPEG decoders)
    bert_with_size = Workload(model="hf:bert-base-uncased", image_size=224, cpu_workers=1)
    assert not feeds_images(bert_with_size) and Stack.from_workload(bert_with_size).input_rate is None


def test_the_decoding_cost_is_at_the_models_own_image_side():
    # the trace runs a ViT-B/16-384 and an Inception v3 at 384 and 299 px: the workers decode at that size
    assert image_side(Workload(model="timm:vit_base_patch16_384")) == 384
    assert image_side(Workload(model="torchvision:inception_v3")) == 299
    assert image_side(Workload(model="torchvision:resnet50", image_size=160)) == 160
    stack = Stack.from_workload(Workload(model="timm:vit_base_patch16_384", cpu_workers=8))
    assert stack.input_rate == pytest.approx(workers_rate(8, 384, True)) and stack.input_rate < workers_rate(8, 224, True)


def _training(trace, **changes):
    return dataclasses.replace(trace, workload=trace.workload.with_(mode="train", optimizer="sgd", **changes))


def test_few_workers_make_a_fast_gpu_data_bound_and_synthetic_data_warns_how_many_cores_it_takes():
    gpu = a100_like()
    base = _training(cnn_trace(256), model="torchvision:resnet50")
    free = predict_step_time(base, gpu)
    cores = cores_to_feed(free.samples_per_s, None, True)
    assert cores > CORES_PER_RENTED_GPU                         # the fake CNN step is fast: the check has teeth
    assert any("CPU cores of decoding" in w and f"~{cores:.0f}" in w for w in free.warnings)
    starved = predict_step_time(_training(cnn_trace(256), model="torchvision:resnet50", cpu_workers=2), gpu)
    assert starved.bound == "input" and starved.samples_per_s == pytest.approx(workers_rate(2, None, True))
    assert any("data-bound" in w and "2 CPU workers" in w for w in starved.warnings)
    one = predict_step_time(_training(cnn_trace(256), model="torchvision:resnet50", cpu_workers=1), gpu)
    assert any("(1 CPU worker decoding" in w for w in one.warnings)
    # not an image model: no decoding warning
    text = predict_step_time(_training(cnn_trace(256), model="test:cnn"), gpu)
    assert not any("CPU cores of decoding" in w for w in text.warnings)


def test_the_cli_refuses_both_rates_in_one_line():
    result = subprocess.run([sys.executable, "-m", "gpuwise.cli.app", "estimate", "torchvision:resnet18",
                             "--cpu-workers", "4", "--input-rate", "100"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and "not both" in result.stderr


def test_estimate_on_every_gpu_says_the_decoding_cores_once(cli_json, capsys):
    from gpuwise.cli.app import main

    argv = ["estimate", "torchvision:resnet50", "--batch-size", "128", "--precision", "amp-bf16", "--gpu", "all"]
    rows = cli_json([*argv, "--json"])["per_gpu"]
    assert any(any("CPU cores of decoding" in w for w in r["warnings"]) for r in rows)
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert not done.value.code
    text = capsys.readouterr().out
    assert text.count("CPU cores of") == 1 and "of these GPUs" in text


def test_the_decoding_warning_is_recognised_by_its_kind_not_its_words():
    """Issue 23 item 4: estimate and recommend picked this warning out by its first word ('feeding ')."""
    import json
    import pickle

    from gpuwise.runtime.input_pipeline import decoding_warning, is_decoding_warning
    from gpuwise.runtime.model import Note

    warning = decoding_warning(5_000, 224)
    assert warning is not None and is_decoding_warning(warning)
    # the same words from elsewhere are not the rule's warning; the rule's survives copies and JSON as words
    assert not is_decoding_warning(str(warning))
    assert is_decoding_warning(pickle.loads(pickle.dumps(warning)))
    assert json.loads(json.dumps([warning])) == [str(warning)]
    with pytest.raises(ValueError, match="unknown note kind"):
        Note("slow-disk", "the disk is slow")
