# Front door: `make`, `make demo`, `make test`, `make install PREFIX=...`.
# CMake does the building; this file picks build directories and runs things.
PREFIX ?= /usr/local
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
CTEST ?= ctest

.PHONY: all demo test test-c test-asan install clean deps

all: $(BUILD)/CMakeCache.txt
	$(CMAKE) --build $(BUILD) -j $(JOBS)

$(BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

$(ASAN_BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSSEG_SANITIZE=ON \
		-DCMAKE_C_COMPILER=$(or $(shell command -v clang 2>/dev/null),cc)

# Installs the build and test dependencies from Debian's archive when one is
# missing (needs root; a machine that has them skips this).
deps:
	@sh tools/install-deps.sh

demo: deps all
	./$(BUILD)/sharedseg demo --ranks 4 --size 256MiB

test-asan: $(ASAN_BUILD)/CMakeCache.txt
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 $(CTEST) --test-dir $(ASAN_BUILD) --output-on-failure -j 2

test-c: all
	$(CTEST) --test-dir $(BUILD) --output-on-failure -j 2

# The Python package's targets (python, test-python) live beside it.
-include python/python.mk
-include bench/bench.mk

# The sanitizer build first, then the release build, the Python tests last,
# so the output ends with the last runner's summary line.
test: deps test-asan test-c $(if $(wildcard python/python.mk),test-python)

install: all
	$(CMAKE) --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
