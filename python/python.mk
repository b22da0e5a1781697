# The Python package: `make python` builds sharedseg._native in place (under
# python/sharedseg/), `make test-python` runs the pytest suite, `make wheel`
# builds a self-contained wheel into dist/. Included by the top-level Makefile.

# Debian's python3-torch, numpy, pytest and mpi4py belong to /usr/bin/python3;
# the first python3 on PATH may be another interpreter without them. Pick the
# first that has torch, else the first that exists; decided once, when used.
PYTHON ?= $(eval PYTHON := $$(shell sh python/find-python.sh))$(PYTHON)

.PHONY: python test-python wheel

python:
	$(PYTHON) python/build_native.py

# The MPI example test links the C library from $(BUILD) when it is built.
test-python: python
	SSEG_BUILD_DIR=$(abspath $(BUILD)) $(PYTHON) -m pytest -q python/tests

wheel:
	$(PYTHON) -m pip wheel --no-build-isolation --no-deps -w dist .
