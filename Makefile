# Two entry points (README): `make run` runs the pipeline on the embedded default dataset,
# `make test` runs the test suite. Both create .venv on first use and reuse it afterwards;
# it is rebuilt only when requirements.lock or pyproject.toml change.
PY ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
CORES ?= 2

.PHONY: run test venv

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@command -v $(PY) >/dev/null || { echo "error: $(PY) not found; this pipeline needs Python 3.11" >&2; exit 1; }
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -r requirements.lock
	$(VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(VENV)/bin/python -m pip check
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/snakemake --cores $(CORES) --configfile config.yaml $(ARGS)
	@$(VENV)/bin/python -m curricula.cli outputs config.yaml

test: $(STAMP)
	$(VENV)/bin/python -m pytest $(ARGS)
