# Two entry points for a fresh machine: `make sweep` and `make test`. Both install what is missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SIZER := $(VENV)/bin/sizer
MXNET_VENV := .venv-mxnet
# The default sweep's outputs (store, report.html, results.json, points.csv).
OUT ?= results

.PHONY: install install-measuring system-deps fio chromium mxnet-env lint test sweep examples clean

# Everything: measuring, the tests and linters, and Ray for the fleet tests (`make test`).
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[torch,dev,ray]'
	@touch $@ $(VENV)/.measuring

# What measuring needs and no more (`make sweep`): no Ray, no linters. PyPI serves PyTorch with
# its CUDA libraries on Linux whether or not the host has a GPU; a host with a CPU-only index
# configured for pip gets the smaller wheels from there.
install-measuring: $(VENV)/.measuring

$(VENV)/.measuring: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[torch]'
	@touch $@

# fio measures disks; Chromium renders the report in its test. Both come from Debian's packages.
fio:
	@command -v fio >/dev/null || scripts/apt-install.sh fio fio

chromium:
	@command -v chromium >/dev/null || scripts/apt-install.sh chromium chromium

system-deps: fio chromium

# MXNet 1.9.1 needs numpy 1.23.5, so it lives in its own environment; its workloads run there.
# That environment has an interpreter of its own, Python 3.8 to 3.11, whatever $(PYTHON) is. Where
# none is installed the script says what to install, and the MXNet tests skip.
mxnet-env: $(MXNET_VENV)/.installed

$(MXNET_VENV)/.installed:
	@scripts/mxnet-env.sh $(MXNET_VENV)

# Style and types: ruff and mypy, configured in pyproject.toml.
lint: install
	$(VENV)/bin/ruff check sizer workloads reports tests lab
	$(VENV)/bin/mypy sizer workloads reports
	$(VENV)/bin/lint-imports --no-cache

test: install system-deps mxnet-env lint
	$(PY) -m pytest -q -rs --durations=15

sweep: install-measuring fio
	$(SIZER) sweep --out $(OUT)

# The committed examples, each rendered from its committed store by the command its README gives.
# An output is remade only when its store, a catalog or a template is newer than it, so a second
# `make examples` does nothing; commit what it rewrote only when one of those inputs changed.
REPORT_INPUTS := $(wildcard sizer/catalogs/*.csv) $(wildcard reports/templates/*)

examples: examples/h100/report.png examples/h200/report.png examples/own-jobs/h100/table.txt

examples/h100/report.html examples/h100/results.json examples/h100/points.csv &: \
		examples/h100/sizer.sqlite $(REPORT_INPUTS) | install
	$(SIZER) report --store examples/h100/sizer.sqlite --out examples/h100 --gpu H100

examples/h200/report.html examples/h200/results.json examples/h200/points.csv &: \
		examples/h200/sizer.sqlite $(REPORT_INPUTS) | install
	$(SIZER) report --store examples/h200/sizer.sqlite --out examples/h200 --gpu H200

examples/own-jobs/h100/report.html examples/own-jobs/h100/results.json &: \
		examples/own-jobs/h100/sizer.sqlite $(REPORT_INPUTS) | install
	$(SIZER) report --store examples/own-jobs/h100/sizer.sqlite --out examples/own-jobs/h100

examples/own-jobs/h100/table.txt: examples/own-jobs/h100/results.json lab/gpu/own_jobs_table.py
	$(PY) lab/gpu/own_jobs_table.py $< > $@.tmp && mv $@.tmp $@

# The screenshot of a report's top that README.md shows.
%/report.png: %/report.html | chromium
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
		--window-size=1280,1700 --virtual-time-budget=5000 --screenshot=$@ file://$(CURDIR)/$<

clean:
	rm -rf $(VENV) $(MXNET_VENV) $(OUT) .pytest_cache
