# SPDX-License-Identifier: Apache-2.0
# The Python package: `make python` builds sharedseg._native in place (under
# python/sharedseg/, no setuptools needed), `make test-python` runs the
# pytest suite on Debian's interpreter, `make test-python-pypi` runs it again
# on the PyPI leg (the newest torch, numpy 2, ml_dtypes; installed by
# `make deps`), `make wheel` builds a self-contained wheel into dist/.
# Included by the top-level Makefile.

# Debian's python3-torch, numpy, pytest and mpi4py belong to /usr/bin/python3;
# the first python3 on PATH may be another interpreter without them. Pick the
# first that has torch, else the first that exists; decided once, when used.
PYTHON ?= $(eval PYTHON := $$(shell sh python/find-python.sh))$(PYTHON)
# The PyPI leg's virtual environment, outside the checkout (tools/install-deps.sh).
PYPI_VENV ?= $(or $(SHAREDSEG_PYPI_VENV),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sharedseg/venv-pypi)
# Which leg runs: the tests check that the leg has what it promises.
SSEG_TEST_LEG ?= debian
# The engines' tests need the PyPI leg's environment; the Debian leg leaves them out.
PYTEST_ARGS ?= -m "not engine"

.PHONY: python test-python test-python-pypi wheel

python:
	$(PYTHON) python/build_native.py

# The MPI example test links the C library from $(BUILD) when it is built.
test-python: python
	SSEG_BUILD_DIR=$(abspath $(BUILD)) SSEG_TEST_LEG=$(SSEG_TEST_LEG) \
		$(PYTHON) -m pytest -q python/tests $(PYTEST_ARGS)

# mpi4py and the install of docs/python.md are Debian's: those run on the Debian leg only.
test-python-pypi:
	@test -x $(PYPI_VENV)/bin/python || \
		{ echo "no PyPI test environment in $(PYPI_VENV): run make deps" >&2; exit 1; }
	$(MAKE) --no-print-directory test-python PYTHON=$(PYPI_VENV)/bin/python \
		SSEG_TEST_LEG=pypi PYTEST_ARGS='-m "not debian"'

# Without setuptools (a fresh 3.12+ virtual environment) pip builds in an
# isolated environment, which fetches setuptools from the package index.
wheel:
	$(PYTHON) -m pip wheel --no-deps -w dist \
		$(shell $(PYTHON) -c 'import setuptools' 2>/dev/null && echo --no-build-isolation) .
