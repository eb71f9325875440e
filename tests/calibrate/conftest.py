from types import SimpleNamespace

import pytest

from gpuwise.cli.app import main


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    """The user's config dir in tmp_path (never the real ~/.config)."""
    d = tmp_path / "config"
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(d))
    return d


@pytest.fixture
def gpuwise(capsys, config_dir):
    """The real command in this process: (returncode, stdout, stderr)."""

    def run(*args):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main([str(a) for a in args])
        out, err = capsys.readouterr()
        code = exit_info.value.code
        return SimpleNamespace(returncode=code if isinstance(code, int) else (0 if code is None else 1),
                               stdout=out, stderr=err)

    return run
