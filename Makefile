# Two entry points (README.md, Quick start): `make run` runs the pipeline on the embedded default dataset,
# `make test` runs the test suite. Both create .venv on first use and reuse it afterwards;
# it is rebuilt only when requirements.lock or pyproject.toml change.
SHELL := bash
.SHELLFLAGS := -o pipefail -c
PY ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
CORES ?= 2
# test workers (pytest-xdist), one a core: the suite is CPU-bound (56 CPU-minutes on a 2-core AVX2 EPYC, 30 minutes
# there with two workers); TEST_WORKERS=0 runs it in this process
TEST_WORKERS ?= auto
# pip on some machines prints one harmless warning per package for an empty extra index; hide only those.
# Bytecode is compiled after the install on every core (pip compiles one file at a time: 64 s against 26 + 21 s
# on 2 cores; compileall exits 1 on the few Python 2 test files some packages ship, which pip skips too).
# The project's own modules and tests keep their bytecode (__pycache__, ignored by git) even where the machine sets
# PYTHONDONTWRITEBYTECODE: otherwise every test worker and pipeline job compiles them again (collecting the fast
# tier: 20-22 s a worker without the cache, 11.7 s with it).
unexport PYTHONDONTWRITEBYTECODE
QUIET_PIP := grep -v "is ignored: it is neither a file nor a directory" || true

.PHONY: run test test-fast venv

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PY) >/dev/null || { echo "error: $(PY) not found; this pipeline needs Python 3.11" >&2; exit 1; }
	@echo "Setting up $(VENV) (first use or changed requirements; about 2-3 minutes)..."
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip 2>&1 | $(QUIET_PIP)
	$(VENV)/bin/python -m pip install --quiet --no-compile -r requirements.lock 2>&1 | $(QUIET_PIP)
	$(VENV)/bin/python -m compileall -qq -j 0 "$$($(VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true
	$(VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e . 2>&1 | $(QUIET_PIP)
	$(VENV)/bin/python -m pip check
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/snakemake --cores $(CORES) $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(ARGS)

# the tests not marked slow (no Snakemake run, model training, JVM or error-rate simulation): a quick check while
# developing
test-fast: $(STAMP)
	$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not slow" $(ARGS)
