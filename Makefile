# The two commands a newcomer needs: `make run` and `make test`. Both install first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test bench bench-stale clean

install: $(STAMP)

# Re-installs only when the project's dependency files change: quick and idempotent otherwise.
$(STAMP): pyproject.toml requirements-dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements-dev.txt
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: install
	$(BIN)/gpuwise recommend hf:bert-base-uncased --seq-len 128 --batch-size 32 --precision amp-fp16 \
		--optimizer adamw --samples 120000 --epochs 3 --deadline 12h --provider autodl

# Up to 4 workers (each imports torch: ~1 GiB apiece); a file's tests stay in one worker, in order.
JOBS ?= $(shell $(PY) -c "import os; print(max(1, min(4, len(os.sched_getaffinity(0)))))")

test: install
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadfile

# Regenerates every results file in benchmarks/results/ (benchmarks/registry.py lists them and the
# ones left out, with why); bench-stale only those older than their inputs.
bench: install
	$(BIN)/python -m benchmarks.run

bench-stale: install
	$(BIN)/python -m benchmarks.run --stale

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
