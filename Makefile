# `make demo` and `make test` each create or refresh .venv (when pyproject.toml changes),
# assemble the embedded model, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install model lint browser demo compare test test-fast clean-cache

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# the local CPU build of torch first, so nothing pulls CUDA wheels
	$(BIN)/pip install -q torch==2.13.0
	# llama-cpp-python compiles from source here (about 5 minutes on 2 cores)
	CMAKE_ARGS="-DLLAVA_BUILD=OFF" $(BIN)/pip install -q -e ".[model,dev,ray]"
	touch $(STAMP)

install: $(STAMP)

model: install
	$(BIN)/treeqa model install

# the main job: compile TreeOfReviews on HotpotQA, zero-shot vs compiled (about 15 minutes after the first install)
demo: model
	$(BIN)/python optimize.py --program tor --dataset hotpotqa

compare: model
	$(BIN)/treeqa compare

# lint first: ruff (rules in pyproject.toml) must be clean before the tests run
lint: install
	$(BIN)/ruff check .

# the page's browser test drives Debian's chromium (no browser download: none can be reached)
browser:
	command -v chromium >/dev/null || (apt-get update -q && apt-get install -y -q chromium)

test: model lint browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: lint
	$(BIN)/python -m pytest -m "not integration" $(PYTEST_ARGS)

clean-cache:
	rm -rf .cache
