# One task runner for README and CI. `make install` sets up .venv with core and every plugin (editable).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PLUGINS := $(sort $(dir $(wildcard plugins/*/pyproject.toml)))

.PHONY: install test demo lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q -e . $(foreach p,$(PLUGINS),-e $(p))

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
