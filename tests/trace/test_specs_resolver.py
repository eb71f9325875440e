"""Model specs resolve through one resolver, with suggestions for typos."""

import pytest

from gpuwise.workload import Workload, WorkloadError
from gpuwise.workload.specs import known_models, resolve_model_spec


@pytest.mark.parametrize("spec, name, task", [
    ("torchvision:resnet50", "torchvision:resnet50", "image-classification"),
    ("ResNet18", "torchvision:resnet18", "image-classification"),
    ("hf:bert-base-uncased", "hf:bert-base-uncased", "sequence-classification"),
    ("hf:BERT-Large-Uncased", "hf:bert-large-uncased", "sequence-classification"),
    ("hf:vit-base-patch16-224", "hf:google/vit-base-patch16-224", "image-classification"),
    ("hf:facebook/opt-125m", "hf:facebook/opt-125m", "causal-lm"),
    ("gpt2-medium", "hf:gpt2-medium", "causal-lm"),
    ("hf:t5-small", "hf:t5-small", "seq2seq-lm"),
    ("torchvision:deeplabv3_resnet50", "torchvision:deeplabv3_resnet50", "segmentation"),
])
def test_known_specs_resolve_to_canonical_names_and_tasks(spec, name, task):
    resolved = resolve_model_spec(spec)
    assert (resolved.name, resolved.task) == (name, task)


def test_every_shipped_config_resolves_by_its_repo_id():
    shipped = [n for n in known_models() if n.startswith("hf:")]
    assert {"hf:gpt2", "hf:roberta-base", "hf:t5-large", "hf:facebook/opt-1.3b"} <= set(shipped)
    for name in shipped:
        assert resolve_model_spec(name).name == name


def test_config_path_and_factory_specs_resolve(data_dir):
    assert resolve_model_spec(f"hf:{data_dir / 'tiny-gpt2.json'}").task == "causal-lm"
    factory = resolve_model_spec(f"{data_dir / 'factories.py'}:mlp")
    assert (factory.source, factory.task) == ("file", "custom")


@pytest.mark.parametrize("spec, suggestion", [
    ("torchvision:resnet5", "torchvision:resnet50"),
    ("hf:bert-bse-uncased", "hf:bert-base-uncased"),
    ("resnt50", "resnet50"),
])
def test_unknown_model_names_the_value_and_suggests_close_ones(spec, suggestion):
    with pytest.raises(WorkloadError) as err:
        resolve_model_spec(spec)
    typed = spec.partition(":")[2] or spec
    assert repr(typed) in str(err.value) or f"hf:{typed}" in str(err.value)
    assert suggestion in str(err.value)


def test_detection_models_are_refused_with_a_reason():
    with pytest.raises(WorkloadError, match="detection"):
        resolve_model_spec("torchvision:fasterrcnn_resnet50_fpn")


def test_factory_that_raises_is_bad_input_naming_file_and_error(data_dir):
    spec = resolve_model_spec(f"{data_dir / 'factories.py'}:broken")
    with pytest.raises(WorkloadError, match=r"factories\.py:broken raised ValueError: no such checkpoint"):
        spec.build(Workload(model=spec.spec, batch_size=2))


def test_missing_factory_function_suggests_the_ones_that_exist(data_dir):
    spec = resolve_model_spec(f"{data_dir / 'factories.py'}:mlp_with_input")
    with pytest.raises(WorkloadError, match="mlp_with_inputs"):
        spec.build(Workload(model=spec.spec, batch_size=2))


def test_missing_files_are_bad_input(tmp_path):
    with pytest.raises(WorkloadError, match="not found"):
        resolve_model_spec(f"{tmp_path / 'nope.py'}:factory")
    with pytest.raises(WorkloadError, match="not found"):
        resolve_model_spec(f"hf:{tmp_path / 'config.json'}")


def test_seq_len_beyond_the_models_positions_is_bad_input():
    spec = resolve_model_spec("hf:bert-base-uncased")
    with pytest.raises(WorkloadError, match="512"):
        spec.build(Workload(model="hf:bert-base-uncased", seq_len=4096))


def test_zero_or_absurd_sizes_are_refused_before_tracing():
    for bad in (dict(batch_size=0), dict(batch_size=-4), dict(seq_len=0), dict(image_size=10**6)):
        with pytest.raises(WorkloadError):
            Workload(model="torchvision:resnet18", **bad)
