"""A new user's trial of estimate and recommend: --plot failures said in one line (exit 2, checked before the
work), options that do not apply warned and not recorded, recommend's over-budget fastest and currencies,
suggestions for misspelt GPUs and timm models, and estimate's wording (--gpu all, --offload params, the logits
note at an optimizer-step peak)."""

from __future__ import annotations

import json

import pytest

SMALL = ["torchvision:resnet18", "--batch-size", "4", "--image-size", "64"]
LLAMA = "hf:meta-llama/Llama-2-7b-hf"
PNG = b"\x89PNG\r\n\x1a\n"


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpuwise: error: "), err
    assert "Traceback" not in err
    return lines[0]


# --- 4. --plot ------------------------------------------------------------------------------------------------

@pytest.fixture
def no_trace(monkeypatch):
    """The model is never traced: a refusal came before the long work."""
    import gpuwise.plan as plan

    def refuse(*_a, **_k):
        raise AssertionError("traced before --plot was checked")

    monkeypatch.setattr(plan, "model_for", refuse)


@pytest.mark.parametrize("command", [["estimate", *SMALL], ["recommend", *SMALL, "--steps", "10"]])
@pytest.mark.parametrize("where, needle", [
    ("missing/dir/x.png", "does not exist"),     # was a FileNotFoundError traceback, exit 1
    ("x.txt", ".txt"),                            # was matplotlib's "Format 'txt' is not supported", exit 1
    ("folder", "is a folder"),                    # was folder.png written beside it, exit 0
])
def test_a_plot_path_that_cannot_be_written_is_one_line_before_the_work(cli_run, tmp_path, no_trace, command,
                                                                       where, needle):
    (tmp_path / "folder").mkdir()
    code, out, err = cli_run(*command, "--plot", str(tmp_path / where))
    assert code == 2 and out == ""
    assert needle in one_error_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]      # nothing written, folder.png included


def test_advise_checks_its_plot_path_before_reading_the_log(cli_run, tmp_path):
    code, _, err = cli_run("advise", str(tmp_path / "no-such-log.csv"), "--plot", str(tmp_path / "x.txt"))
    assert code == 2 and ".txt" in one_error_line(err)


def test_a_closed_form_llm_has_no_memory_timeline_to_plot(cli_run, tmp_path, recwarn):
    png = tmp_path / "llm.png"
    code, out, err = cli_run("estimate", LLAMA, "--seq-len", "1024", "--batch-size", "1", "--plot", str(png))
    assert code == 2 and out == ""
    assert "no memory timeline" in one_error_line(err) and "closed form" in err
    assert not png.exists()                                  # was an empty chart, "No artists with labels found"
    assert not [w for w in recwarn if "artists" in str(w.message)]


def test_a_traced_decoder_generating_has_no_timeline_with_its_kv_cache(cli_run, tmp_path):
    png = tmp_path / "gen.png"
    code, out, err = cli_run("estimate", "hf:gpt2", "--mode", "infer", "--seq-len", "128", "--max-new-tokens", "64",
                             "--plot", str(png))
    assert code == 2 and out == ""
    assert "KV cache" in one_error_line(err) and "--max-new-tokens" in err
    assert not png.exists()


def test_a_name_without_suffix_is_a_png_under_exactly_that_name(cli_run, tmp_path):
    target = tmp_path / "memory"
    code, out, err = cli_run("estimate", *SMALL, "--plot", str(target))
    assert code == 0, err
    assert target.read_bytes()[:8] == PNG and not (tmp_path / "memory.png").exists()
    assert f"plot written to {target}" in " ".join(out.split())


def test_a_recommendation_with_nothing_to_draw_prints_its_answer_then_refuses_the_plot(cli_run, tmp_path):
    png = tmp_path / "rec.png"
    code, out, err = cli_run("recommend", LLAMA, "--seq-len", "4096", "--batch-size", "8", "--steps", "10",
                             "--gpus", "t4", "--max-gpus", "1", "--no-remedies", "--plot", str(png))
    assert code == 2 and "nothing meets the request" in out      # the answer is printed, not lost
    assert "no option fits" in one_error_line(err)
    assert not png.exists()


def test_at_a_request_rate_the_plot_puts_each_option_at_its_request_time(cli_run, tmp_path, monkeypatch):
    import matplotlib.axes

    xs: list[float] = []
    scatter = matplotlib.axes.Axes.scatter

    def recording(self, x, y, *a, **k):
        xs.append(float(x))
        return scatter(self, x, y, *a, **k)

    monkeypatch.setattr(matplotlib.axes.Axes, "scatter", recording)
    png = tmp_path / "rate.png"
    code, _, err = cli_run("recommend", LLAMA, "--mode", "infer", "--max-new-tokens", "128", "--request-rate", "2",
                           "--gpus", "h100-sxm,a100-80gb-sxm4,rtx-4090", "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == PNG
    assert len({round(x, 6) for x in xs}) > 3       # every option served an hour: all were drawn at x = 1 h


# --- 8. options that do not apply ------------------------------------------------------------------------------

def test_seq_len_on_a_vision_model_is_warned_and_not_recorded(cli_run):
    code, out, err = cli_run("estimate", "torchvision:resnet18", "--batch-size", "2", "--image-size", "64",
                             "--seq-len", "4096", "--json")
    assert code == 0
    assert "--seq-len has no effect" in err and "takes images" in err
    assert json.loads(out)["workload"]["seq_len"] is None


def test_image_size_on_a_text_model_is_warned_and_not_recorded(cli_run):
    code, out, err = cli_run("estimate", LLAMA, "--seq-len", "256", "--batch-size", "1", "--image-size", "512",
                             "--json")
    assert code == 0
    assert "--image-size has no effect" in err and "takes tokens" in err
    assert json.loads(out)["workload"]["image_size"] is None


# --- 10. recommend --------------------------------------------------------------------------------------------

BUDGET_JOB = ["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "512", "--batch-size", "8",
              "--samples", "100000", "--budget", "$1"]


def test_an_over_budget_fastest_says_so_and_the_fastest_within_budget_follows(cli_run):
    code, out, _ = cli_run(*BUDGET_JOB)
    assert code == 0
    text = " ".join(out.split())
    fastest = text.split("Fastest: ", 1)[1].split(" Fastest within budget: ", 1)[0]
    assert "left out: over budget by" in fastest          # was shown as the fastest, its cost over the budget
    assert "Fastest within budget: " in text


def test_over_budget_reasons_are_in_the_ranking_currency(cli_run):
    code, out, _ = cli_run(*BUDGET_JOB, "--all")
    assert code == 0
    text = " ".join(out.split())
    overs = text.split("over budget by ")[1:]
    assert len(overs) > 2 and all(o.startswith("¥") for o in overs), overs     # was ¥ beside $ (lambda, runpod)


def test_a_json_reason_is_in_the_ranking_currency_too(cli_json):
    d = cli_json([*BUDGET_JOB, "--json"])
    reasons = [o["excluded_because"] for o in d["options"] if (o["excluded_because"] or "").startswith("over budget")]
    assert reasons and all(r.startswith("over budget by ¥") for r in reasons)


def test_a_short_misspelt_gpu_gets_a_suggestion(cli_run):
    code, _, err = cli_run("recommend", *SMALL, "--steps", "10", "--gpus", "t5")
    assert code == 2 and "did you mean: t4" in one_error_line(err)


def test_an_unknown_timm_model_says_where_the_names_are():
    from gpuwise.workload.errors import WorkloadError
    from gpuwise.workload.specs import resolve_model_spec
    with pytest.raises(WorkloadError) as info:
        resolve_model_spec("timm:notamodel")
    assert "timm.list_models()" in str(info.value) and "resnet50" in str(info.value)


def test_llm_serving_without_new_tokens_or_a_size_names_max_new_tokens(cli_run):
    code, _, err = cli_run("recommend", LLAMA, "--mode", "infer", "--seq-len", "1024", "--batch-size", "8")
    assert code == 2 and "--max-new-tokens N" in one_error_line(err)


# --- 11. estimate wording -------------------------------------------------------------------------------------

def test_gpu_all_does_not_say_no_gpu_was_given_and_says_bandwidth_as_one_gpu_does(cli_run):
    code, out, _ = cli_run("estimate", "torchvision:mobilenet_v2", "--batch-size", "8", "--gpu", "all")
    assert code == 0
    text = " ".join(out.split())
    assert "no GPU given" not in text and "assumes an A100" in text
    table = out.split("Every GPU in the catalog", 1)[1].split("note:", 1)[0]
    bounds = {line.split()[-1] for line in table.splitlines() if "GiB" in line}
    assert "bandwidth" in bounds and "memory" not in bounds     # single-GPU output says "bound by bandwidth"


def test_offload_params_says_only_the_sharding_it_is_treated_as(cli_json):
    d = cli_json(["estimate", LLAMA, "--seq-len", "2048", "--batch-size", "1", "--offload", "params", "--json"])
    treated = [n for n in d["memory"]["notes"] if "treated as" in n]
    assert len(treated) == 1 and treated[0].endswith("treated as zero3"), treated


def test_the_logits_note_only_where_the_activations_make_the_peak(cli_json):
    at_step = cli_json(["estimate", "hf:Qwen/Qwen3-30B-A3B", "--finetune", "lora", "--seq-len", "2048",
                        "--batch-size", "1", "--grad-checkpointing", "--json"])["memory"]
    assert at_step["activations_bytes"] == 0
    assert not [n for n in at_step["notes"] if "logits of the loss" in n]    # was "take 3.5 GiB of the activations"
    in_forward = cli_json(["estimate", "hf:Qwen/Qwen2.5-7B", "--finetune", "lora", "--seq-len", "4096",
                           "--batch-size", "4", "--grad-checkpointing", "--json"])["memory"]
    assert in_forward["activations_bytes"] > 0 and [n for n in in_forward["notes"] if "logits of the loss" in n]


def test_a_remedy_is_priced_in_the_ranking_currency(cli_run, monkeypatch):
    import importlib

    plan_recommend = importlib.import_module("gpuwise.plan.recommend")   # (gpuwise.plan.recommend is also a function)
    remedy = {"change": "--grad-checkpointing", "gpu_name": "NVIDIA H100 80GB SXM5", "provider": "lambda",
              "peak_total_bytes": 60 * 2**30, "gpu_memory_bytes": 80 * 2**30, "total_time_s": 3600.0,
              "total_cost": 3.0, "currency": "USD", "total_cost_ranked": 21.6, "ranking_currency": "CNY"}
    monkeypatch.setattr(plan_recommend, "find_remedies", lambda *a, **k: (remedy,))
    code, out, _ = cli_run(*BUDGET_JOB[:-2])
    assert code == 0
    line = " ".join(out.split()).split("To fit a cheaper GPU: ", 1)[1]
    assert "¥21.60 (lambda)" in line and "$" not in line.split("(lambda)")[0]     # was "$3.00" beside ¥ costs
