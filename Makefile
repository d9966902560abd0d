# `make demo` and `make test` each create or refresh .venv (when pyproject.toml, constraints.txt or this
# Makefile changes), assemble the embedded model, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# torch's CPU build: this index serves it on a plain PyPI machine (PyPI's own torch pulls CUDA
# packages, several GB); point it elsewhere (a mirror, or PyPI's index for the CUDA build)
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_PIN := torch==$(shell sed -n 's/^torch==//p' constraints.txt)

.PHONY: install model lint browser demo compare test test-fast clean-cache

# llama.cpp is built for this CPU (-march=native) but without ggml's AMX kernels: on Xeons that
# have AMX (amx_int8) they crash the first decode with a segfault (llama-cpp-python 0.3.36).
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DCMAKE_C_FLAGS=-mno-amx-int8 -DCMAKE_CXX_FLAGS=-mno-amx-int8
LLAMA_PIN = llama-cpp-python[server]==$(shell sed -n 's/^llama_cpp_python==//p' constraints.txt)

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch's CPU build first, so nothing later pulls CUDA wheels: a wheel pip's --find-links folders
	# hold, else TORCH_INDEX's (make TORCH_INDEX= leaves pip to its own indexes)
	$(BIN)/pip install -q --no-index --no-deps "$(TORCH_PIN)" 2>/dev/null || \
	$(BIN)/pip install -q $(if $(TORCH_INDEX),--extra-index-url "$(TORCH_INDEX)") "$(TORCH_PIN)"
	# torch's own dependencies (filelock, sympy, ...) from the usual index; torch is satisfied already
	$(BIN)/pip install -q "$(TORCH_PIN)"
	# llama-cpp-python compiles from source (about 3-5 minutes on 2 cores); rebuilt whenever this
	# stamp is stale and never taken from pip's wheel cache, which ignores the build flags
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q --no-cache-dir --force-reinstall --no-deps "$(LLAMA_PIN)"
	# the exact versions treeqa is tested with (pyproject.toml states the ranges an app resolves)
	$(BIN)/pip install -q -c constraints.txt -e ".[model,dev,ray]"
	touch $(STAMP)

install: $(STAMP)

model: install
	$(BIN)/treeqa model install

# the main job: compile TreeOfReviews on HotpotQA (the path judge, then the released trained reader), then
# rta, zero-shot ToR and compiled ToR side by side on the first 10 of the 197 unexamined dev questions the
# README's table is measured on (about 20 minutes on 2 cores after the first install)
# the demo's questions: HotpotQA's official files into the user data folder, unless a data folder has them
DEMO_QUESTIONS ?= 10
demo: model
	$(BIN)/treeqa data get hotpotqa --if-missing
	$(BIN)/python optimize.py --program tor --dataset hotpotqa --skip 100 --dev $(DEMO_QUESTIONS) --against rta

compare: model
	$(BIN)/treeqa compare

# lint first: ruff (rules in pyproject.toml) must be clean before the tests run
lint: install
	$(BIN)/ruff check .

# the page's browser test drives Debian's chromium (no browser download: none can be reached);
# without root it is not installed, and the test skips itself
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q chromium; \
	else echo "no chromium and not root: the page's browser test is skipped (apt-get install chromium as root runs it)"; fi

test: model lint browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: lint
	$(BIN)/python -m pytest -m "not integration" $(PYTEST_ARGS)

clean-cache:
	rm -rf .cache
