# SPDX-License-Identifier: Apache-2.0
# Front door: `make`, `make demo`, `make test`, `make install PREFIX=...`.
# CMake does the building; this file picks build directories and runs things.
PREFIX ?= /usr/local
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
CTEST ?= ctest

.PHONY: all demo check test test-c test-asan test-tsan test-host-states install clean deps

all: $(BUILD)/CMakeCache.txt
	$(CMAKE) --build $(BUILD) -j $(JOBS)

CONFIGURE = $(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

$(BUILD)/CMakeCache.txt:
	$(CONFIGURE)

$(ASAN_BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSSEG_SANITIZE=ON \
		-DCMAKE_C_COMPILER=$(or $(shell command -v clang 2>/dev/null),cc)

# Installs the build and test dependencies when one is missing: Debian's
# packages (needs root; a machine that has them skips this), the PyPI test
# environment and the wheel's build tools (tools/install-deps.sh, the one
# list). make test runs it; make demo needs only a C compiler and cmake.
deps:
	@PYTHON=$(PYTHON) sh tools/install-deps.sh

# The build's own output goes to a log, shown only when the build fails:
# what a newcomer reads is the demo's table.
# (No recursive $(MAKE) here: make -n demo must run nothing.)
demo:
	@mkdir -p $(BUILD)
	@echo "building sharedseg (log: $(BUILD)/make-demo.log)"
	@{ test -f $(BUILD)/CMakeCache.txt || $(CONFIGURE); } >$(BUILD)/make-demo.log 2>&1 && \
		$(CMAKE) --build $(BUILD) -j $(JOBS) --target sseg_cli >>$(BUILD)/make-demo.log 2>&1 || \
		{ cat $(BUILD)/make-demo.log; echo "make demo: the build failed (its log is above)" >&2; \
		exit 1; }
	@$(BUILD)/sharedseg demo --ranks 4 --size 256MiB

# The Python package first here too: the bench's smoke test runs its Python half.
test-asan: $(ASAN_BUILD)/CMakeCache.txt $(if $(wildcard python/python.mk),python)
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 $(CTEST) --test-dir $(ASAN_BUILD) --output-on-failure -j 2

$(TSAN_BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSSEG_TSAN=ON \
		-DCMAKE_C_COMPILER=$(or $(shell command -v clang 2>/dev/null),cc)

# ThreadSanitizer over the tests labelled concurrency only (their list is
# SSEG_CONCURRENCY_TESTS in tests/CMakeLists.txt; concurrency_tests builds them).
# A named target is looked up before make regenerates a build directory, so
# one configured before the target existed is configured again first.
test-tsan: $(TSAN_BUILD)/CMakeCache.txt
	$(CMAKE) $(TSAN_BUILD) >/dev/null
	$(CMAKE) --build $(TSAN_BUILD) -j $(JOBS) --target concurrency_tests
	TSAN_OPTIONS=halt_on_error=1 $(CTEST) --test-dir $(TSAN_BUILD) -L concurrency --output-on-failure

# The Python package first: the bench's smoke test runs its Python half.
test-c: all $(if $(wildcard python/python.mk),python)
	$(CTEST) --test-dir $(BUILD) --output-on-failure -j 2

# The loop for a change (docs/testing.md): one build, the C tests but the
# slow ones (labelled slow: they change the host's knobs at length, or run
# the benchmark), and the Python tests that need neither the engines'
# environment nor a wheel build, on Debian's interpreter. make test is the
# whole matrix.
check: all python
	$(CTEST) --test-dir $(BUILD) -j $(JOBS) -LE slow --output-on-failure
	SSEG_BUILD_DIR=$(abspath $(BUILD)) SSEG_TEST_LEG=debian $(PYTHON) -m pytest -q \
		-p no:cacheprovider python/tests -m "not engine and not build"

# The Python package's targets (python, test-python) live beside it.
-include python/python.mk
-include bench/bench.mk

# The sanitizer builds first, then the release build, the Python tests last
# (Debian's torch, then PyPI's), so the output ends with the last runner's
# summary line.
# The release build's tests again under three states of the host's huge-page
# knobs (none, some, plenty; root only), with the Python examples, and the
# Debian leg's whole Python suite under plenty (as found, without root).
test-host-states: all python
	sh tests/knobs/host_states.sh $(BUILD) $(PYTHON)

# In make test, each suite runs once in each state it is meant for: test-c
# has run ctest in the state the machine is in, so test-host-states leaves
# that state's ctest out; the Debian leg's whole Python suite runs under
# plenty there, and in the state found only its own tests (test-python-own),
# since the PyPI leg runs all the rest in that state.
test: export HOST_STATES_FOUND_TESTED := 1
test: deps test-asan test-tsan test-c test-host-states test-netns test-aarch64 $(if $(wildcard python/python.mk),test-python-own test-python-vllm033 test-python-pypi)
-include tests/reliability/reliability.mk
-include tests/cross/cross.mk

install: all
	$(CMAKE) --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
