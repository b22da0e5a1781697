# SPDX-License-Identifier: Apache-2.0
# The benchmarks: `make bench` runs the quick matrix (a few minutes; fits a
# 24 GiB, 2-core machine), `make bench FULL=1` the bigger one. Both write
# bench/results/latest.json, docs/benchmarks.md and docs/bench_*.png. As
# root the run sets the THP knobs and the HugeTLB pool its cases need and
# puts back what it found. `make bench BENCH_ARGS="--only vllm --update"`
# reruns vLLM's offload region alone, keeping latest.json's other rows.
# Included by the top-level Makefile.
BENCH_ARGS ?=
PYTHON ?= /usr/bin/python3

# vLLM's region against ours runs on the PyPI leg's environment, which has
# vLLM (make deps), with the package built for its interpreter.
PYPI_VENV ?= $(or $(SHAREDSEG_PYPI_VENV),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sharedseg/venv-pypi)

.PHONY: bench bench-deps bench-report bench-pypi-python vllm033-region

# matplotlib, for the plots, is on tools/install-deps.sh's list.
bench-deps: deps vllm033-region

# vLLM 0.33's region, a baseline of bench/vllmbench.py: the one file, from
# PyPI's vllm 0.33.0 wheel (its CUDA build needs torch 2.14 and CUDA's
# libraries to install; the region is Python and mmap, and runs over the
# PyPI leg's vLLM 0.32 modules it imports). Once per machine.
VLLM033_REGION ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sharedseg/vllm-0.33.0/shared_offload_region.py
vllm033-region:
	@test -s $(VLLM033_REGION) || { test -x $(PYPI_VENV)/bin/python && \
		sh bench/fetch_vllm033.sh $(PYPI_VENV)/bin/python $(VLLM033_REGION); }

bench-pypi-python:
	@if [ -x $(PYPI_VENV)/bin/python ]; then $(MAKE) --no-print-directory python \
		PYTHON=$(PYPI_VENV)/bin/python; fi

# The smoke test (ctest bench_smoke) runs the vLLM rows too.
test-c test-asan: bench-pypi-python vllm033-region

bench: bench-deps all python bench-pypi-python
	$(PYTHON) bench/run.py --build $(BUILD) $(if $(FULL),--full) $(BENCH_ARGS)

# The report and plots again, from bench/results/latest.json as it is.
bench-report:
	$(PYTHON) bench/report.py
