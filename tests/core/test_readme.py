import re
import tomllib
from pathlib import Path

from gpuwise.catalog import load_catalog, offers_for

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TOUR = ROOT / "docs" / "tour.md"
CONSOLE = re.compile(r"```console\n\$ ((?:[^\n]*\\\n)*[^\n]+)\n(.*?)```", re.S)


def test_readme_gives_the_two_commands():
    text = README.read_text()
    assert "make run" in text and "make test" in text


def test_the_readme_catalog_example_is_a_valid_user_catalog(tmp_path):
    (block,) = re.findall(r"```toml\n(.*?)```", README.read_text(), re.S)
    path = tmp_path / "catalog.toml"
    path.write_text(block)
    catalog = load_catalog(path, user_file=False)
    autodl = offers_for(catalog, "rtx-4090", provider="autodl")
    assert any(o.price_per_hour == 1.78 and o.count == 1 for o in autodl)


def test_the_readme_is_a_page_and_the_tour_and_raw_logs_live_in_docs():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert not re.search(r"^step=\d+ ", text, re.M), "raw training log lines belong in docs/tour.md, if anywhere"
    assert "(docs/tour.md" in text and TOUR.is_file()


def test_the_readme_shows_the_output_of_make_run_at_80_columns():
    make_run = re.search(r"^run: install\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    make_cmd = " ".join(make_run.replace("\\\n", " ").replace("$(BIN)/", "").split())
    blocks = {" ".join(cmd.replace("\\\n", " ").split()): body for cmd, body in CONSOLE.findall(README.read_text())}
    assert make_cmd in blocks, "README must show the command `make run` runs"
    body = blocks[make_cmd]
    assert "Best:" in body and "bound /" in body
    assert max(len(line) for line in body.splitlines()) <= 80


def test_the_readme_links_to_sections_of_the_tour_that_exist():
    headings = re.findall(r"^## (.+)$", TOUR.read_text(), re.M)
    slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
    anchors = re.findall(r"\(docs/tour\.md#([^)]+)\)", README.read_text())
    assert anchors and set(anchors) <= slugs, set(anchors) - slugs


def test_every_dependency_is_named_in_the_readme_with_a_reason():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=;\s\[]", d, maxsplit=1)[0].lower() for d in deps}
    table = README.read_text().split("## Dependencies, and why each", 1)[1].split("\n## ", 1)[0].lower()
    missing = [n for n in names if n not in table and n.replace("-", "_") not in table]
    assert not missing, f"dependencies without a reason in README: {missing}"


def test_the_llm_pages_examples_are_blocks_the_refresh_script_re_runs():
    # docs/llm.md's examples were plain blocks pasted by hand, some cut with "...": they drifted (an L20's TTFT
    # documented 20.9 s, printed 16.0 s) with nothing to re-run them
    text = (ROOT / "docs" / "llm.md").read_text()
    plain = re.findall(r"```\n\$ gpuwise", text)
    assert not plain, "a `$ gpuwise` example in a plain ``` block: make it ```console (scripts/refresh_readme.py)"
    commands = CONSOLE.findall(text)
    assert len(commands) >= 5 and all("\n...\n" not in body for _, body in commands)
