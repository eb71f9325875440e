"""Fixtures the report tests share."""

import json

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.cli.app import main


@pytest.fixture(scope="module")
def catalog():
    """The shipped catalog, without the user's own catalog file."""
    return load_catalog(user_file=False)


@pytest.fixture
def report_json(tmp_path, monkeypatch, capsys):
    """Runs ``gpuwise report LOG ARGS --json`` in this process, never with the user's calibration; its JSON (exit 0
    asserted)."""
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(tmp_path / "config"))

    def run(log, *args):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(["report", str(log), *args, "--json"])
        out, err = capsys.readouterr()
        assert exit_info.value.code in (0, None), err
        return json.loads(out)

    return run
