# The README's two commands: `make run` and `make test`. Both create .venv and install the project first.
PYTHON ?= python3
VENV ?= .venv
# Which torch (jitload/builder/torch_select.py, `python3 jitload/builder/torch_select.py --why` says why): none
# where $(PYTHON) already has one (the article's container: the venv sees it), else the build whose CUDA major
# matches nvcc's (13: torch 2.14.1; 12: torch 2.8.0, whose PyPI build is CUDA 12.8's; no nvcc: 2.14.1).
# TORCH_SPEC=... overrides.
TORCH_SPEC ?= $(shell $(PYTHON) jitload/builder/torch_select.py --pip-args)
VENV_FLAGS ?= $(shell $(PYTHON) jitload/builder/torch_select.py --venv-flags)
BIN := $(VENV)/bin
# Where the environment sets PYTHONDONTWRITEBYTECODE, each Python process compiles every module it imports
# afresh (pip installs with --no-compile below): `import torch, jitload` took 4.6 s on 2 cores against 1.7 s
# from bytecode, and `make run` and `make test` start hundreds of processes (builds, checks, torch.compile's
# workers). The bytecode goes under the venv instead, never beside a source file.
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache
unexport PYTHONDONTWRITEBYTECODE

IMAGE ?= pytorch-cuda:v2.8

# The suite runs on pytest-xdist's workers, one a core; a file's tests stay on one worker, in order (they
# share its fixtures' builds, and some build on each other's edits), except the notebooks, one by one
# (tests/conftest.py). Units go out in collection order, slow ones first, not xdist's most-tests-first, which
# would leave the longest (a notebook, one test of minutes) for last. PYTEST_ARGS adds to the command line.
PYTEST_WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

.PHONY: run test test-torch2.8 test-fast lint bench-reload clean system-deps docker-build docker-up

$(BIN)/activate:
	@echo "torch: $$($(PYTHON) jitload/builder/torch_select.py --why)"
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)

# `jitload prepare`: the host JIT's precompiled torch headers (20-40 s of one core, once per machine and torch
# version), so that a first load and a process's first host edit take the interpreter in seconds.
# --no-compile: pip would byte-compile every module of torch and Jupyter ahead of time; Python compiles the ones a
# process imports on first use instead, a fraction of them.
$(VENV)/.installed: pyproject.toml | $(BIN)/activate
	$(BIN)/pip install --quiet --upgrade pip
	$(if $(strip $(TORCH_SPEC)),$(BIN)/pip install --quiet --no-compile $(TORCH_SPEC),@echo "torch: the one $(PYTHON) has")
	$(BIN)/pip install --quiet --no-compile -e ".[dev]"
	$(BIN)/jitload prepare || echo "jitload prepare failed (above): first loads build in full until it succeeds"
	touch $@

run: $(VENV)/.installed
	$(BIN)/jitload doctor
	$(BIN)/jitload bench --all --compiled --report build/report

lint: $(VENV)/.installed
	$(BIN)/ruff check jitload tests benchmarks kernels

# The container's services are tested with Debian's sshd, and JupyterLab in Debian's headless Chromium driven
# through its chromedriver. `make system-deps` installs what is missing (as root, with apt-get); `make test`
# never installs system packages: without them those tests are skipped and say so.
SYSTEM_PACKAGES := /usr/sbin/sshd:openssh-server /usr/bin/chromium:chromium /usr/bin/chromedriver:chromium-driver
system-deps:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do [ -x "$${p%%:*}" ] || echo "$${p#*:}"; done); \
	if [ -z "$$missing" ]; then echo "system packages present: openssh-server chromium chromium-driver"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "missing $$missing: run 'sudo make system-deps' (apt-get install $$missing)"; exit 1; fi

# Everything, end-to-end cases included, then the torch 2.8 lane.
test: $(VENV)/.installed lint
	$(PYTEST)
	$(MAKE) --no-print-directory test-torch2.8

# The seed article's torch (its container's 2.8.0; PyPI's build of it is CUDA 12.8's) in a virtual environment of its
# own: the builder, the swap decision, the host JIT, the checker, the CLI and doctor, run against that release's
# real private API. pip's cache keeps the wheels for the next run. A CUDA compile needs a CUDA 12 nvcc there
# (torch refuses another major): where nvcc is another release, those tests skip and say so (tests/conftest.py).
VENV_TORCH28 ?= .venv-torch2.8
TORCH28_TESTS ?= tests/test_torch_compat.py tests/test_torch_select.py tests/test_toolchain.py \
	tests/test_compiler_probe.py tests/test_cli.py tests/test_extension.py tests/test_swap.py \
	tests/test_hostjit.py tests/test_checker.py tests/test_errors.py tests/test_fingerprint.py tests/test_docker.py
$(VENV_TORCH28)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_TORCH28)
	$(VENV_TORCH28)/bin/pip install --quiet --upgrade pip
	$(VENV_TORCH28)/bin/pip install --quiet --no-compile torch==2.8.0
	$(VENV_TORCH28)/bin/pip install --quiet --no-compile -e ".[dev]"
	touch $@

test-torch2.8: $(VENV_TORCH28)/.installed
	$(VENV_TORCH28)/bin/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS) \
		$(TORCH28_TESTS)

# The developer loop: everything but the tests marked slow (browser, DDP, notebooks, pip install ./kernels, ...).
test-fast: $(VENV)/.installed
	$(PYTEST) -m "not slow"

bench-reload: $(VENV)/.installed
	$(BIN)/python benchmarks/reload.py

docker-build:
	docker build -f docker/Dockerfile -t $(IMAGE) .

docker-up:
	docker compose -f docker/compose.yaml up

clean:
	rm -rf $(VENV) $(VENV_TORCH28) build *.egg-info
