# The README's commands. `make run` and `make test` work on a fresh machine with only the repo:
# they create .venv, install the pinned Python packages and Debian's graphviz, then do their job.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
OUT ?= out
WORKLOAD ?= rmsnorm_matmul
APT_PACKAGES := graphviz chromium

.PHONY: run test lab install system-deps lint typecheck unit clean

run: install
	$(PY) -m prism optimize $(WORKLOAD) --measure model --out $(OUT)

test: install lint typecheck unit

lab: install
	$(PY) -m prism lab

install: system-deps $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# torch first and pinned: 2.13.0 is the CPU build on local disk; anything else pulls gigabytes.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[test,ray]'
	touch $@

system-deps:
	@missing=""; command -v dot >/dev/null || missing="graphviz"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v g++ >/dev/null || missing="$$missing g++"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends \
	    $$missing >/dev/null; \
	fi

lint:
	$(VENV)/bin/ruff check prism widgets tests bench

typecheck:
	$(VENV)/bin/mypy

unit:
	$(PY) -m pytest -q

clean:
	rm -rf $(OUT) .pytest_cache .mypy_cache .ruff_cache
