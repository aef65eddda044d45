# Two entry points for a fresh machine: `make console` and `make test`. Each creates .venv and
# installs what it needs the first time (again whenever a requirements file changes).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: console test test-fast test-browser demo-model demo-data demo-dpo demo-grpo cluster

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	touch $@

# llama-cpp-python (requirements-export.txt) is built from source: portable (no -march=native), without
# its multimodal library, two compile jobs
LLAMA_CPP_BUILD := CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt requirements-tracking.txt requirements-eval.txt requirements-export.txt $(VENV)/.installed
	$(LLAMA_CPP_BUILD) $(PY) -m pip install -q -r requirements-dev.txt
	touch $@

console: $(VENV)/.installed
	$(PY) -m app

# The whole suite, the real-browser test included. That test drives Debian's chromium
# (/usr/bin/chromium: `sudo bash scripts/install_browser.sh`); without it the test is skipped, or
# fails when MINDTUNE_REQUIRE_BROWSER=1 (as .ci/run sets). Screenshots land in test-artifacts/.
test: $(VENV)/.installed-dev cluster
	$(PY) -m pytest -q -rs

# The two-node Slurm cluster the Slurm backend's tests run against (scripts/slurm_cluster.sh), started
# when make runs as root; otherwise those tests are skipped (or fail under MINDTUNE_REQUIRE_SLURM=1).
cluster:
	@if [ "$$(id -u)" -eq 0 ]; then bash scripts/slurm_cluster.sh start; \
	else echo "not root: no Slurm test cluster started (sudo bash scripts/slurm_cluster.sh start)"; fi

# The edit-test loop: no training runs, browser, Slurm or device tests (about 2 minutes on 2 busy cores)
test-fast: $(VENV)/.installed-dev
	$(PY) -m pytest -q -m "not slow and not browser and not slurm and not device"

test-browser: $(VENV)/.installed-dev
	bash scripts/install_browser.sh
	MINDTUNE_REQUIRE_BROWSER=1 $(PY) -m pytest -q -m browser

demo-data: $(VENV)/.installed-dev
	$(PY) data/make_demo_data.py

demo-model: $(VENV)/.installed-dev
	$(PY) models/make_tiny_demo.py

# The demo DPO run as the guide measures it: the demo SFT run (configs/lora_demo.yaml), then
# configs/dpo_demo.yaml forked from its best checkpoint (scripts/demo_dpo.py). SFT=runs/<id> reuses
# a finished SFT run instead of training one.
demo-dpo: $(VENV)/.installed
	$(PY) scripts/demo_dpo.py $(if $(SFT),--sft $(SFT))

# The demo GRPO run: the same SFT run, then configs/grpo_demo.yaml forked from its best checkpoint
demo-grpo: $(VENV)/.installed
	$(PY) scripts/demo_dpo.py --config configs/grpo_demo.yaml $(if $(SFT),--sft $(SFT))
