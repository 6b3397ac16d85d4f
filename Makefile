# One task runner for README and CI. `make install` sets up .venv with core and every plugin (editable).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := $(sort $(dir $(wildcard plugins/*/pyproject.toml)))
STAMP := $(VENV)/.pps-installed
# Quiet the build backend's advice about editable installs; real errors still fail the build.
PIP := PYTHONWARNINGS=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 $(BIN)/pip

.PHONY: install test demo lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): $(BIN)/python requirements-dev.txt pyproject.toml $(wildcard plugins/*/pyproject.toml)
	$(PIP) install -q -r requirements-dev.txt
	$(PIP) install -q --no-build-isolation -e . $(foreach p,$(PLUGINS),-e $(p))
	touch $(STAMP)

install: $(STAMP)

test: install
	$(BIN)/python -m pytest -q

demo: install
	$(BIN)/python -m pps_core.demo

lint: install
	$(BIN)/ruff check pps_core plugins tests bench

bench: install
	$(BIN)/python bench/startup.py

clean:
	rm -rf $(VENV) .demo
