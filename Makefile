# The README's two commands: `make run` and `make test`. Both create .venv and install the project first.
PYTHON ?= python3
VENV ?= .venv
# torch 2.14.1 is the CUDA 13.0 build on this project's machines (see README); override for others.
TORCH_SPEC ?= torch==2.14.1
BIN := $(VENV)/bin

IMAGE ?= pytorch-cuda:v2.8

.PHONY: run test lint bench-reload clean system-deps docker-build docker-up

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

# The container's services are tested with Debian's sshd, and JupyterLab in Debian's headless Chromium driven
# through its chromedriver; as root (CI), install what is missing.
SYSTEM_PACKAGES := /usr/sbin/sshd:openssh-server /usr/bin/chromium:chromium /usr/bin/chromedriver:chromium-driver
system-deps:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do [ -x "$${p%%:*}" ] || echo "$${p#*:}"; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else echo "missing $$missing: the tests that need them will be skipped (apt-get install $$missing)"; fi; \
	fi

test: $(VENV)/.installed lint system-deps
	$(BIN)/python -m pytest

bench-reload: $(VENV)/.installed
	$(BIN)/python benchmarks/reload.py

docker-build:
	docker build -f docker/Dockerfile -t $(IMAGE) .

docker-up:
	docker compose -f docker/compose.yaml up

clean:
	rm -rf $(VENV) build *.egg-info
