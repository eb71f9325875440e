import re
from pathlib import Path

from gpuwise.catalog import load_catalog, offers_for

README = Path(__file__).resolve().parents[2] / "README.md"


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
