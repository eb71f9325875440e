"""The user's own model (file.py:factory), optimizers, frozen parameters and bad input."""

import pytest

from gpuwise.trace import TraceError, trace_workload
from gpuwise.trace.optimizers import BLOCK_8BIT
from gpuwise.workload import Workload

from trace_helpers import live_bytes_after, peak_live_bytes


def _trace(data_dir, factory, **kw):
    return trace_workload(Workload(model=f"{data_dir / 'factories.py'}:{factory}", **kw))


def test_factory_with_inputs_and_loss_follows_the_workload_batch(data_dir):
    trace = _trace(data_dir, "mlp_with_inputs", batch_size=16)
    first = next(op for op in trace.ops if op.op == "aten.addmm.default")
    assert first.input_shapes[1] == (16, 64) and first.module == "backbone.0"
    assert trace.samples_per_step == 16


def test_factory_without_inputs_gets_them_guessed_from_the_first_layer(data_dir):
    trace = _trace(data_dir, "mlp", batch_size=3)
    assert any("guessed (3, 64)" in note for note in trace.notes)


def test_frozen_parameters_get_no_gradients_and_no_optimizer_state(data_dir):
    trace = _trace(data_dir, "frozen_backbone", batch_size=4)
    head_params = 256 * 10 + 10
    assert trace.trainable_param_count == head_params
    grads = sum(e.size_bytes for e in trace.events if e.category == "gradients" and e.kind == "alloc")
    assert grads == 2 * 4 * head_params
    assert live_bytes_after(trace.events)["optimizer"] == 2 * 4 * head_params


@pytest.mark.parametrize("optimizer, state_bytes_per_param", [
    ("none", 0), ("sgd", 0), ("momentum", 4), ("adam", 8), ("adamw", 8), ("lion", 4),
])
def test_optimizer_state_has_the_optimizers_size(data_dir, optimizer, state_bytes_per_param):
    trace = _trace(data_dir, "mlp_with_inputs", batch_size=4, optimizer=optimizer)
    left = live_bytes_after(trace.events)
    assert left["optimizer"] == state_bytes_per_param * trace.trainable_param_count


def test_8bit_adamw_keeps_uint8_states_and_blockwise_absmax(data_dir):
    trace = _trace(data_dir, "mlp_with_inputs", batch_size=4, optimizer="adamw-8bit")
    state = live_bytes_after(trace.events)["optimizer"]
    assert 2 * trace.trainable_param_count <= state < 2.1 * trace.trainable_param_count
    assert BLOCK_8BIT == 2048


def test_adafactor_state_is_factored_and_smaller_than_adams(data_dir):
    trace = _trace(data_dir, "mlp_with_inputs", batch_size=4, optimizer="adafactor")
    assert 0 < live_bytes_after(trace.events)["optimizer"] < 4 * trace.trainable_param_count


def test_train_needs_more_than_infer(data_dir):
    train = _trace(data_dir, "mlp_with_inputs", batch_size=64)
    infer = _trace(data_dir, "mlp_with_inputs", batch_size=64, mode="infer")
    assert peak_live_bytes(infer.events) < peak_live_bytes(train.events)


def test_memory_grows_with_batch(data_dir):
    small = _trace(data_dir, "mlp_with_inputs", batch_size=64, optimizer="sgd")
    large = _trace(data_dir, "mlp_with_inputs", batch_size=256, optimizer="sgd")
    assert peak_live_bytes(large.events, {"activations"}) > 3 * peak_live_bytes(small.events, {"activations"})


def test_operator_the_tracer_cannot_handle_names_operator_and_module(data_dir):
    with pytest.raises(TraceError, match=r"cannot trace operator aten\.\w*unique\w*.* in module '<top>'"):
        _trace(data_dir, "data_dependent", batch_size=4)


def test_lora_finetune_goes_through_the_llm_part_and_trains_only_adapters(data_dir):
    workload = Workload(model=f"hf:{data_dir / 'tiny-llama.json'}", batch_size=2, seq_len=64, finetune="lora",
                        lora_rank=4)
    trace = trace_workload(workload)
    assert 0 < trace.trainable_param_count < trace.param_count / 2
    grads = sum(e.size_bytes for e in trace.events if e.category == "gradients" and e.kind == "alloc")
    assert grads == 2 * 4 * trace.trainable_param_count   # fp32 adapters, two steps


def test_gradient_accumulation_keeps_gradients_alive_through_the_next_forward(data_dir):
    plain = _trace(data_dir, "mlp_with_inputs", batch_size=4, optimizer="sgd")
    accum = _trace(data_dir, "mlp_with_inputs", batch_size=4, optimizer="sgd", grad_accum_steps=4)

    def gradient_bytes_at_first_forward_op(trace):
        first = next(op.index for op in trace.ops if op.phase == "forward")
        live = 0
        for e in trace.events:
            if e.op_index == first and e.kind == "alloc":
                break
            if e.category == "gradients":
                live += e.size_bytes if e.kind == "alloc" else -e.size_bytes
        return live

    assert gradient_bytes_at_first_forward_op(plain) == 0
    assert gradient_bytes_at_first_forward_op(accum) == 4 * accum.trainable_param_count


def test_models_that_compute_with_tensors_while_built_still_skip_real_weights(data_dir):
    trace = _trace(data_dir, "computed_widths", batch_size=2, optimizer="sgd")
    assert trace.param_count == (8 * 16 + 16) + (16 * 32 + 32) + (32 * 48 + 48)
