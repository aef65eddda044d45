# Two entry points for a fresh machine: `make console` and `make test`. Each creates .venv and
# installs what it needs the first time (again whenever a requirements file changes).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: console test test-fast test-browser demo-model demo-data

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt $(VENV)/.installed
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

console: $(VENV)/.installed
	$(PY) -m app

# The whole suite except the real-browser tests (they need Debian's chromium: `make test-browser`).
test: $(VENV)/.installed-dev
	$(PY) -m pytest -q -m "not browser"

test-fast: $(VENV)/.installed-dev
	$(PY) -m pytest -q -m "not slow and not browser"

test-browser: $(VENV)/.installed-dev
	bash scripts/install_browser.sh
	$(PY) -m pytest -q -m browser

demo-data: $(VENV)/.installed-dev
	$(PY) data/make_demo_data.py

demo-model: $(VENV)/.installed-dev
	$(PY) models/make_tiny_demo.py
