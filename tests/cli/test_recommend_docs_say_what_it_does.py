"""The recommend pages say what the code does: --max-gpus past 8 (whole machines, not refused), the spot rate per
machine, and steps rounded up per epoch. Each figure is computed from the code, so a change of rule fails here."""

from __future__ import annotations

from pathlib import Path

from gpuwise.plan import JobSize
from gpuwise.plan.recommend import MAX_GPUS, quoted_counts
from gpuwise.plan.spot import SpotRisk

DOCS = Path(__file__).resolve().parents[2] / "docs"


def words_of(page: str) -> str:
    return " ".join((DOCS / page).read_text().split())


def recommend_section_of_the_tour() -> str:
    return words_of("tour.md").split("## `gpuwise recommend`", 1)[1].split(" ## ", 1)[0]


def test_the_tour_says_max_gpus_past_eight_quotes_whole_machines_and_names_the_real_limit(cli_run):
    code, _, err = cli_run("recommend", "torchvision:resnet18", "--samples", "100", "--max-gpus", str(MAX_GPUS * 2))
    assert code == 2 and f"at most {MAX_GPUS}" in err
    assert 16 in quoted_counts(16) and 32 in quoted_counts(32)
    section = recommend_section_of_the_tour()
    assert "more than 8 is refused" not in section          # was: "more than 8 is refused (exit 2: … one node"
    assert f"up to {MAX_GPUS}" in section and "16, 32" in section and "(recommend.md)" in section


def test_plan_md_says_the_spot_rate_is_per_machine_and_the_note_lists_each_count():
    risk = SpotRisk()
    note = risk.describe((1, 4))
    added = note.rsplit("(", 1)[1].rstrip(")")               # "+2.1% time and cost, +8.3% on 4 machines"
    row = words_of("plan.md").split("| `--preemptions-per-hour R` |", 1)[1].split(" | ", 2)[1]
    assert "on each machine" in note and "on each machine" in row
    assert "m × R × (`--checkpoint-every`/2 + 10 min)" in row and "SpotRisk.lost_share(machines)" in row
    assert f'"{added}"' in row
    assert f"{risk.lost_share(4) * 100:.1f} % on 4" in row


def test_plan_and_recommend_pages_say_steps_are_rounded_up_per_epoch():
    samples, epochs, batch = 1_281_167, 90, 256
    steps = JobSize(samples=samples, epochs=epochs).optimizer_steps(batch)
    per_epoch = JobSize(samples=samples).steps_per_epoch(batch)
    assert steps == epochs * per_epoch > samples * epochs / batch
    for page in ("plan.md", "recommend.md"):
        text = words_of(page)
        assert "rounded up per epoch" in text and "drop_last=False" in text, page
        assert f"{epochs} × {per_epoch:,} = {steps:,} steps" in text, page
        assert f"≈ {samples * epochs / batch:,.0f}" in text, page
