"""Session-wide: the tests never use the network. Hub lookups see only the caches the tests build."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"       # read at call time by gpuwise.workload.hub; inherited by subprocesses
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The trace cache stays out of the user's ~/.cache and is off unless a test turns it on (tests that
# patch the tracer must see it run); tests/trace/test_trace_cache.py points it at tmp_path.
os.environ["GPUWISE_NO_CACHE"] = "1"
os.environ.setdefault("GPUWISE_CACHE_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gpuwise-test-cache-{os.getpid()}"))

# Wheels that a SkyPilot emit builds (gpuwise.launch.wheel) go to $XDG_CACHE_HOME, kept out of ~/.cache too.
os.environ["XDG_CACHE_HOME"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gpuwise-test-xdg-{os.getpid()}")

# A developer's own ~/.config/gpuwise (catalog.toml, calibration.toml) must not change what the tests see;
# tests that need a config dir point GPUWISE_CONFIG_DIR at tmp_path themselves.
os.environ["GPUWISE_CONFIG_DIR"] = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gpuwise-test-config-{os.getpid()}")


def _default_signal_dispositions() -> None:
    """The signals tests send, at their defaults in this process, so that every child starts with them so.

    A child inherits an ignored (or blocked) signal from whatever started pytest (``nohup``, a CI runner's
    ``trap '' HUP QUIT``, a background job's SIGINT), and gpuwise rightly leaves an ignored signal ignored:
    a test that sends one would wait for a stop that never comes. Handlers Python or a plugin installed are
    left alone (a child starts with those at their defaults anyway); only ignored ones are reset."""
    import signal

    sent = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
            signal.SIGALRM)
    for s in sent:
        if signal.getsignal(s) == signal.SIG_IGN:
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, sent)


_default_signal_dispositions()


import json  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def cli_json(capsys):
    """Runs a gpuwise command in this process and returns its --json object (exit 0 asserted)."""
    from gpuwise.cli.app import main

    def run(argv: list[str]) -> dict:
        capsys.readouterr()
        try:
            main(argv)
        except SystemExit as exc:
            assert not exc.code, capsys.readouterr().err
        return json.loads(capsys.readouterr().out)

    return run


@pytest.fixture
def cli_run(capsys, monkeypatch):
    """Runs a gpuwise command in this process at ``COLUMNS`` 80 (the default terminal); returns (exit code,
    stdout, stderr)."""
    from gpuwise.cli.app import main

    monkeypatch.setenv("COLUMNS", "80")

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code or 0
        else:
            code = 0
        out, err = capsys.readouterr()
        return code, out, err

    return run


# A Llama-2-7B-shaped config.json, as a user without the Hub passes it (hf:path/to/folder)
LLAMA_2_7B_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                     "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
                     "num_key_value_heads": 32, "vocab_size": 32000, "max_position_embeddings": 4096,
                     "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "torch_dtype": "float16",
                     "hidden_act": "silu"}


@pytest.fixture(scope="session")
def llama7b_spec(tmp_path_factory) -> str:
    """The model spec of a local folder holding ``LLAMA_2_7B_CONFIG`` (``hf:/…/llama7b``)."""
    folder = tmp_path_factory.mktemp("llama7b")
    (folder / "config.json").write_text(json.dumps(LLAMA_2_7B_CONFIG))
    return f"hf:{folder}"
