# The README's two commands: `make run` and `make test`. Both create .venv and install the project first.
PYTHON ?= python3
VENV ?= .venv
# torch 2.14.1 is the CUDA 13.0 build on this project's machines (see README); override for others.
TORCH_SPEC ?= torch==2.14.1
BIN := $(VENV)/bin

.PHONY: run test lint bench-reload clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

run: $(VENV)/.installed
	$(BIN)/jitload doctor
	$(BIN)/jitload bench --all --compiled --report build/report

lint: $(VENV)/.installed
	$(BIN)/ruff check jitload tests benchmarks kernels

test: $(VENV)/.installed lint
	$(BIN)/python -m pytest

bench-reload: $(VENV)/.installed
	$(BIN)/python benchmarks/reload.py

clean:
	rm -rf $(VENV) build *.egg-info
