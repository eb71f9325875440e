"""¥ is both yuan and yen: a new user's `recommend … --currency JPY --budget ¥1000` was read silently as 1000 CNY
(about 20,800 JPY), while `1000JPY` worked. Where costs are ranked in yen, a ¥ amount is refused in one line."""

from __future__ import annotations

QWEN = ["recommend", "hf:Qwen/Qwen2.5-0.5B", "--finetune", "lora", "--seq-len", "512", "--samples", "1000",
          "--no-remedies", "--json"]   # the closed form: no trace


def test_a_yen_sign_budget_where_costs_are_ranked_in_yen_is_refused_in_one_line(cli_run):
    for sign in ("¥", "￥"):
        code, out, err = cli_run(*QWEN, "--currency", "JPY", "--budget", f"{sign}1000")
        assert code == 2 and out == ""
        (line,) = err.strip().splitlines()
        assert "--budget" in line and "1000CNY" in line and "1000JPY" in line and "yen" in line


def test_a_budget_that_says_its_currency_is_read_as_said(cli_json):
    yen = cli_json([*QWEN, "--currency", "JPY", "--budget", "1000JPY"])
    assert yen["ranking_currency"] == "JPY"
    cny = cli_json([*QWEN, "--currency", "JPY", "--budget", "1000CNY"])
    assert cny["ranking_currency"] == "JPY"
    # ranked in yuan, ¥ is yuan as before
    yuan = cli_json([*QWEN, "--provider", "autodl", "--budget", "¥1000"])
    assert yuan["ranking_currency"] == "CNY"


def test_the_one_money_rule_refuses_yen_sign_only_where_yen_ranks():
    import pytest

    from gpuwise.plan.money import MoneyError, parse_price

    assert parse_price("¥1000") == (1000.0, "CNY")
    assert parse_price("¥1000", ranking_currency="USD") == (1000.0, "CNY")
    assert parse_price("1000JPY", ranking_currency="JPY") == (1000.0, "JPY")
    with pytest.raises(MoneyError, match="ambiguous"):
        parse_price("¥1000", ranking_currency="JPY")


def test_advise_and_report_read_a_yen_sign_price_by_the_same_rule(cli_run, tmp_path):
    # from the review: advise parsed --gpu-price before --currency, report never passed the ranking currency
    import pytest

    from gpuwise.report.build import price_options
    from gpuwise.report.errors import ReportError

    log = tmp_path / "loss.csv"
    log.write_text("step,loss\n" + "".join(f"{s},{2.0 + 4.0 / s ** 0.5}\n" for s in range(1, 200)))
    code, out, err = cli_run("advise", str(log), "--gpu-price", "¥300", "--currency", "JPY")
    assert code == 2 and out == "" and "--gpu-price" in err and "ambiguous" in err
    code, _, err = cli_run("advise", str(log), "--gpu-price", "¥300", "--currency", "USD")
    assert code == 0, err
    with pytest.raises(ReportError, match="--gpu-price: ¥300 is ambiguous"):
        price_options(None, gpu_price="¥300", currency="JPY")
    assert price_options(None, gpu_price="¥300", currency="USD")[0] == (300.0, "CNY")
