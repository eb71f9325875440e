"""A new user's trial of LLM serving (`--request-rate`): ten defects, end to end through the CLI."""

import json
import re

import pytest


Q05 = ["hf:Qwen/Qwen2.5-0.5B", "--mode", "infer", "--seq-len", "512", "--max-new-tokens", "64"]
L8 = ["hf:meta-llama/Llama-3.1-8B", "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256"]
L70 = ["hf:meta-llama/Llama-3.1-70B", "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256"]


@pytest.fixture
def gpuwise(cli_run):
    return cli_run


def _one_line_refusal(code, err):
    return code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("gpuwise: error: ")


# 1. --emit wrote a torchrun line starting `vllm serve` once per GPU, one replica, no tensor parallelism
# (--emit skypilot now writes a SkyServe task: tests/launch/test_skyserve_task.py)
@pytest.mark.parametrize("emit", ["torchrun"])
def test_emit_for_a_server_names_what_to_run_instead_of_a_torchrun_line(gpuwise, emit):
    code, out, err = gpuwise("recommend", *L70, "--engine", "vllm", "--request-rate", "30", "--gpus", "h100-sxm",
                             "--emit", emit, "--command", "vllm serve meta-llama/Llama-3.1-70B")
    assert _one_line_refusal(code, err), err
    assert not out and "training command" not in err
    said = re.search(r"`vllm serve meta-llama/Llama-3\.1-70B --tensor-parallel-size (\d) --max-model-len 1280` on each "
                     r"of (\d+) replicas", err)
    assert said, err
    code, out, _ = gpuwise("recommend", *L70, "--engine", "vllm", "--request-rate", "30", "--gpus", "h100-sxm", "--json")
    best = json.loads(out)["best"]
    assert (int(said[1]), int(said[2])) == (best["count"], best["replicas"]) and best["replicas"] > 1
    # without --command, the same refusal (not "--emit needs --command: the training command")
    code, out, err = gpuwise("recommend", *L70, "--engine", "vllm", "--request-rate", "30", "--gpus", "h100-sxm",
                             "--emit", emit)
    assert _one_line_refusal(code, err) and "vllm serve" in err and "training command" not in err


# 2. estimate quoted 8-way tensor parallelism of a model recommend refuses on 8 GPUs
@pytest.mark.parametrize("count", [3, 8])
def test_estimate_refuses_the_gpu_counts_recommend_refuses_with_the_same_reason(gpuwise, count):
    from gpuwise.plan.profile import ClosedFormLlmModel
    from gpuwise.workload import Workload

    code, out, err = gpuwise("estimate", "hf:Qwen/Qwen2.5-7B", "--mode", "infer", "--engine", "vllm", "--gpu",
                             "h100-sxm", "--num-gpus", str(count), "--max-new-tokens", "16")
    reason = ClosedFormLlmModel(Workload("hf:Qwen/Qwen2.5-7B", mode="infer", engine="vllm")).count_refusal(count)
    assert reason and _one_line_refusal(code, err) and reason in err, err
    code, out, err = gpuwise("estimate", "hf:Qwen/Qwen2.5-7B", "--mode", "infer", "--engine", "vllm", "--gpu",
                             "h100-sxm", "--num-gpus", "4", "--max-new-tokens", "16", "--json")
    assert code == 0, err


# 3. "largest batch that fits 205" and "memory would hold 211807 tokens" beside a load batching 224 up to 256
def test_vllm_capacity_is_one_figure_in_one_output(gpuwise):
    code, out, err = gpuwise("estimate", *L8, "--engine", "vllm", "--request-rate", "20", "--gpu", "h100-sxm", "--json")
    assert code == 0, err
    inf = json.loads(out)["inference"]
    vllm = inf["vllm"]
    assert inf["max_batch_size"] == min(vllm["sequences_at_context"], vllm["max_num_seqs"]) == 350
    assert vllm["max_num_seqs"] == 1024           # vLLM 0.34's default from 70 GiB but on an A100
    assert "the KV cache: " in inf["at_load"]["batch_limit"]
    code, out, err = gpuwise("estimate", *L8, "--engine", "vllm", "--request-rate", "20", "--gpu", "h100-sxm")
    text = " ".join(out.split())
    assert "largest batch that fits 350" in text
    held = re.search(r"KV cache would hold ([\d,]+) tokens", text)
    assert held and "," in held[1], text         # thousands separators on token counts


def test_vllm_holds_more_sequences_than_hf_and_every_command_says_the_same(gpuwise):
    args = ["hf:meta-llama/Llama-2-7b-hf", "--mode", "infer", "--seq-len", "1024", "--max-new-tokens", "256"]
    largest = {}
    for engine in ("vllm", "hf"):
        code, out, err = gpuwise("estimate", *args, "--engine", engine, "--gpu", "a100-80gb-sxm4", "-b", "1", "--json")
        assert code == 0, err
        largest[engine] = json.loads(out)["inference"]["max_batch_size"]
        code, out, err = gpuwise("estimate", *args, "--engine", engine, "--gpu", "a100-80gb-sxm4", "--max-batch",
                                 "--json")
        answer = json.loads(out)
        assert answer["max_batch_size"] == largest[engine] and answer["fits"] is True
        code, out, err = gpuwise("recommend", *args, "--engine", engine, "--gpus", "a100-80gb-sxm4", "--max-gpus", "1",
                                 "-b", "auto", "--no-remedies", "--json")
        assert json.loads(out)["best"]["batch_size"] == largest[engine]
    assert 88 <= largest["vllm"] <= 98 and 72 <= largest["hf"] <= 82      # vLLM's reservation, HF's 95% peak rule


# 4. "fits with 2.8 GiB to spare" (estimate) and "no room for one sequence's KV cache" (recommend)
def test_a_vllm_job_whose_reservation_holds_no_sequence_does_not_fit_on_either_command(gpuwise):
    flags = ["--quant", "int8", "--engine", "vllm", "--request-rate", "1"]
    code, out, err = gpuwise("estimate", *L70, *flags, "--gpu", "h100-sxm", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["fits"] is False and "no room for one sequence's KV cache" in answer["fit_summary"]
    assert answer["inference"]["max_batch_size"] == 0
    code, out, err = gpuwise("recommend", *L70, *flags, "--gpus", "h100-sxm", "--max-gpus", "1", "--json")
    (option,) = json.loads(out)["options"]
    assert option["fits"] is False and "no room for one sequence's KV cache" in option["excluded_because"]
    code, out, err = gpuwise("estimate", *L70, *flags, "--gpu", "h100-sxm", "--num-gpus", "2", "--json")
    answer = json.loads(out)
    assert answer["fits"] is True and answer["inference"]["at_load"]["replicas"] >= 1


# 5. --request-rate without one --gpu printed the batch table; its JSON claimed the "large-batch" regime
@pytest.mark.parametrize("where", [[], ["--gpu", "all"]])
def test_a_rate_without_one_gpu_is_refused(gpuwise, where):
    code, out, err = gpuwise("estimate", *Q05, "--request-rate", "2", *where)
    assert _one_line_refusal(code, err) and "--gpu NAME" in err, err


def test_an_llm_estimate_without_a_timed_gpu_names_no_traced_regime(gpuwise):
    from gpuwise.plan.accuracy import load_accuracy

    assert load_accuracy("large-batch") is not None      # a traced regime's accuracy would show
    code, out, err = gpuwise("estimate", *Q05, "--gpu", "all", "--json")
    assert code == 0, err
    answer = json.loads(out)
    llm = load_accuracy("llm")
    assert answer["time_accuracy"] == (llm.to_dict() if llm is not None else None)
    timed = [row["regime"] for row in answer["per_gpu"] if row["step_time_s"] is not None]
    assert timed and set(timed) == {"llm"}


# 6. the hf default at a rate: BEST's first token after 4.2 min, 524 requests in flight
def test_a_request_rate_defaults_the_engine_to_vllm_and_says_so(gpuwise):
    code, out, err = gpuwise("recommend", *L8, "--request-rate", "2", "--provider", "autodl", "--max-gpus", "1",
                             "--json")
    rec = json.loads(out)
    assert rec["workload"]["engine"] == "vllm" and rec["best"]["ttft_s"] < 10
    code, out, err = gpuwise("recommend", *L8, "--request-rate", "2", "--provider", "autodl", "--max-gpus", "1")
    assert "engine vllm (the default at --request-rate" in " ".join(out.split())
    code, out, err = gpuwise("recommend", *L8, "--request-rate", "2", "--provider", "autodl", "--max-gpus", "1",
                             "--engine", "hf", "--json")
    assert json.loads(out)["workload"]["engine"] == "hf"
    code, out, err = gpuwise("estimate", *L8, "--gpu", "l4", "--json")        # no rate: hf, as before
    assert json.loads(out)["workload"]["engine"] == "hf"


# 7. "busy 98%" at half the capacity read as saturation
def test_the_table_shows_the_load_a_replica_carries_and_json_keeps_the_busy_share(gpuwise):
    code, out, err = gpuwise("recommend", *Q05, "--engine", "vllm", "--request-rate", "4", "--provider", "autodl",
                             "--max-gpus", "1", "--json")
    served = [o for o in json.loads(out)["options"] if o["replicas"]]
    for o in served:
        assert o["load"] == pytest.approx(4 / o["replicas"] / o["capacity_per_replica_per_s"])
        assert 0 < o["utilisation"] < 1
    code, out, err = gpuwise("recommend", *Q05, "--engine", "vllm", "--request-rate", "4", "--provider", "autodl",
                             "--max-gpus", "1")
    text = " ".join(out.split())
    assert " load " in text and "busy" not in text.split("load: ")[0]
    assert "load: the rate each replica carries as a share of the most it can carry" in text


# 8. training options given with --mode infer were dropped in silence
@pytest.mark.parametrize("flags, said", [
    (["--finetune", "lora"], "--finetune lora has no effect with --mode infer"),
    (["--sharding", "zero3"], "--sharding zero3 has no effect with --mode infer"),
    (["--offload", "params"], "--offload params has no effect with --mode infer"),
    (["--logits", "chunked"], "--logits chunked has no effect with --mode infer"),
    (["--finetune", "qlora"], "--finetune qlora with --mode infer serves the base weights in nf4"),
])
def test_training_options_in_serving_are_said_once(gpuwise, flags, said):
    code, out, err = gpuwise("estimate", *Q05, *flags, "--gpu", "l4")
    assert code == 0 and err.count(said) == 1, err


@pytest.mark.parametrize("flags, said", [
    (["--effective-batch", "64"], "--effective-batch has no effect with --mode infer"),
    (["--per-gpu-batch"], "--per-gpu-batch has no effect with --mode infer"),
])
def test_recommend_batch_options_in_serving_are_said_once(gpuwise, flags, said):
    code, out, err = gpuwise("recommend", *Q05, *flags, "--gpus", "l4", "--max-gpus", "1", "--no-remedies")
    assert code == 0 and err.count(said) == 1, err


# 9. "infer, bf16 (the default …)" with --quant nf4
@pytest.mark.parametrize("command, where", [("estimate", ["--gpu", "l4"]), ("recommend", ["--gpus", "l4"])])
def test_the_header_names_the_weights_quantization(gpuwise, command, where):
    code, out, err = gpuwise(command, *Q05, "--quant", "nf4", *where)
    assert code == 0 and "infer," in out and "nf4 weights" in " ".join(out.splitlines()[:3]), out


# 10. ids cut mid-word at 80 columns, three latency styles in one column, words that fit no server
def test_the_load_table_keeps_ids_whole_and_one_latency_style(gpuwise):
    flags = ["--engine", "hf", "--request-rate", "2", "--all", "--max-gpus", "2", "--spot"]   # "gcp (spot)": wider
    code, out, err = gpuwise("recommend", *L8, *flags)
    assert code == 0, err
    code_json, raw, _ = gpuwise("recommend", *L8, *flags, "--json")
    ids = {o["gpu"] for o in json.loads(raw)["options"]}
    rows = [line for line in out.splitlines() if re.match(r"^(BEST|value|fastest|\s+)\S", line)]
    shown = {line.split()[1] if line.split()[0] in ("BEST", "value", "fastest") else line.split()[0] for line in rows}
    assert ids <= shown, sorted(ids - shown)     # every id whole on its row (was "a100-80gb-s" / "xm4")
    assert max(map(len, out.splitlines())) <= 80
    latencies = re.findall(r"(\d[\d.,]*\s?(?:ms|min|s|h))\s+(\d[\d.,]*\s?(?:ms|min|s|h))\s+¥", out)
    assert latencies
    for cell in (c for pair in latencies for c in pair):
        assert re.fullmatch(r"\d+\.\d (ms|s|min|h)", cell), cell     # units.format_duration, one style


def test_ttft_help_and_spot_notes_speak_of_a_server_at_a_rate(gpuwise):
    from gpuwise.cli.recommend import recommend
    import inspect

    ttft_help = next(p.annotation.__metadata__[0].help for p in inspect.signature(recommend).parameters.values()
                     if p.name == "ttft")
    assert "--request-rate" in ttft_help and "wait for it" in ttft_help
    code, out, err = gpuwise("recommend", *Q05, "--engine", "vllm", "--request-rate", "2", "--spot", "--json")
    notes = " ".join(json.loads(out)["notes"])
    assert "requests in flight" in notes and "checkpoint" not in notes


# (review) spare_bytes +2.76 GiB beside fits false: spare memory came from the headroom rule, the verdict from vLLM's
def test_spare_memory_comes_from_the_rule_that_decides_the_fit(gpuwise):
    flags = ["--quant", "int8", "--engine", "vllm"]
    for count, fits in (("1", False), ("2", True)):
        code, out, err = gpuwise("estimate", *L70, *flags, "--gpu", "h100-sxm", "--num-gpus", count, "--json")
        assert code == 0, err
        answer = json.loads(out)
        assert answer["fits"] is fits and (answer["spare_bytes"] >= 0) is fits, (count, answer["spare_bytes"])
    code, out, err = gpuwise("estimate", *L70, *flags, "--gpu", "all", "--json")
    assert code == 0, err
    rows = json.loads(out)["per_gpu"]
    assert any(r["fits"] for r in rows) and not all(r["fits"] for r in rows)
    assert all((r["spare_bytes"] >= 0) == r["fits"] for r in rows), [(r["gpu"], r["fits"], r["spare_bytes"]) for r in rows]
    code, out, err = gpuwise("recommend", *L70, *flags, "--gpus", "h100-sxm", "--max-gpus", "2", "--json")
    assert code == 0, err
    quoted = [o for o in json.loads(out)["options"] if o["spare_bytes"] is not None]
    assert {o["fits"] for o in quoted} == {True, False}
    assert all((o["spare_bytes"] >= 0) == o["fits"] for o in quoted)
