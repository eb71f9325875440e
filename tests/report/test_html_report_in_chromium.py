"""The HTML report with its plots, opened in a real headless browser (Debian's chromium) and screenshotted."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gpuwise.catalog import load_catalog
from gpuwise.report import build_report
from gpuwise.report.html import write_html

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "seed_a100_smi.csv"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def seed_html(tmp_path_factory) -> Path:
    report = build_report(SEED, load_catalog(user_file=False), gpu_price=(15.0, "CNY"))
    return write_html(report, tmp_path_factory.mktemp("html") / "seed.html")


def test_html_is_self_contained_with_two_plots_and_the_verdict(seed_html):
    text = seed_html.read_text()
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(images) == 2
    for data in images:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "cheaper GPU(s) would have held this job" in text and "¥" in text
    assert "http://" not in text and "https://" not in text  # nothing to fetch


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium): cannot check the HTML in a browser")
def test_html_report_renders_in_headless_chromium(seed_html, tmp_path):
    shot = tmp_path / "seed.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--window-size=1100,1600", f"--screenshot={shot}", seed_html.as_uri()],
            capture_output=True, timeout=300, check=False,   # a browser start on a loaded machine: generous
        )
    assert shot.is_file() and shot.stat().st_size > 10_000
    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    # Not blank: text and plots make many dark pixels on the white page, and many distinct grey levels.
    assert (pixels < 128).mean() > 0.01 and len(np.unique(pixels)) > 50
    keep = os.environ.get("GPUWISE_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
