"""Trial 5 of the catalog: an [[offer]] of yours spelt as gpuhunt or a price page spells its provider ("lambdalabs",
"AutoDL", "Alibaba Cloud") is that provider's offer. Before, "lambdalabs" stood beside the shipped "lambda" as a
provider of its own (both listed, the shipped price not replaced, `--provider lambda` blind to yours) and "AutoDL"
was listed so beside the shipped "autodl" rows, in `gpus --json` too: one provider, two spellings for scripts to
group by. The one spelling is the topology data's (``topology.provider_name``), as live offers use."""

from __future__ import annotations

import json
import textwrap

import pytest

from gpuwise.catalog import CatalogError, load_catalog, offers_for
from gpuwise.catalog.resolve import providers
from gpuwise.cli.app import main

OFFER = """
[[offer]]
provider = "{provider}"
gpu = "{gpu}"
price_per_hour = {price}
currency = "{currency}"
source = "the provider's price page"
checked = "2026-12-01"
"""


def _catalog(tmp_path, *offers: tuple[str, str, float, str]):
    path = tmp_path / "mine.toml"
    path.write_text(textwrap.dedent("".join(OFFER.format(provider=p, gpu=g, price=x, currency=c)
                                            for p, g, x, c in offers)))
    return path


@pytest.mark.parametrize(("written", "spelt", "gpu", "currency"), [
    ("lambdalabs", "lambda", "a100-40gb-sxm4", "USD"),
    ("AutoDL", "autodl", "rtx-4090", "CNY"),
    ("Alibaba Cloud", "aliyun", "t4", "CNY"),
])
def test_your_offer_replaces_the_shipped_one_of_its_provider_however_spelt(tmp_path, written, spelt, gpu, currency):
    catalog = load_catalog(_catalog(tmp_path, (written, gpu, 0.5, currency)))
    ones = [o for o in offers_for(catalog, gpu, provider=spelt) if o.count == 1 and not o.spot]
    assert [(o.provider, o.price_per_hour, o.indicative) for o in ones] == [(spelt, 0.5, False)]
    assert written not in providers(catalog) and spelt in providers(catalog)


def test_gpus_json_names_one_provider_one_way(tmp_path, capsys):
    path = _catalog(tmp_path, ("AutoDL", "rtx-4090", 1.68, "CNY"))
    with pytest.raises(SystemExit) as done:
        main(["gpus", "rtx-4090", "rtx-3090", "--provider", "autodl", "--catalog", str(path), "--json"])
    assert done.value.code in (0, None)
    names = {o["provider"] for g in json.loads(capsys.readouterr().out)["gpus"] for o in g["offers"]}
    assert names == {"autodl"}


def test_one_file_giving_a_provider_under_two_spellings_is_refused(tmp_path):
    path = _catalog(tmp_path, ("lambda", "a10", 0.7, "USD"), ("lambdalabs", "a10", 0.6, "USD"))
    with pytest.raises(CatalogError, match="given twice in this file"):
        load_catalog(path)
