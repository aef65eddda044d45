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

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt requirements-eval.txt $(VENV)/.installed
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

console: $(VENV)/.installed
	$(PY) -m app

# The whole suite, the real-browser test included. That test drives Debian's chromium
# (/usr/bin/chromium: `sudo bash scripts/install_browser.sh`); without it the test is skipped, or
# fails when MINDTUNE_REQUIRE_BROWSER=1 (as .ci/run sets). Screenshots land in test-artifacts/.
test: $(VENV)/.installed-dev
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed-dev
	$(PY) -m pytest -q -m "not slow and not browser"

test-browser: $(VENV)/.installed-dev
	bash scripts/install_browser.sh
	MINDTUNE_REQUIRE_BROWSER=1 $(PY) -m pytest -q -m browser

demo-data: $(VENV)/.installed-dev
	$(PY) data/make_demo_data.py

demo-model: $(VENV)/.installed-dev
	$(PY) models/make_tiny_demo.py
