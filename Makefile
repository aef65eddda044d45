# Two entry points for a fresh machine: `make console` and `make test`. Each creates .venv and
# installs what it needs the first time (again whenever a requirements file changes).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: console test test-fast demo-model demo-data

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt $(VENV)/.installed
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

console: $(VENV)/.installed
	$(PY) -m app

test: $(VENV)/.installed-dev
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed-dev
	$(PY) -m pytest -q -m "not slow"

demo-data: $(VENV)/.installed-dev
	$(PY) data/make_demo_data.py

demo-model: $(VENV)/.installed-dev
	$(PY) models/make_tiny_demo.py
