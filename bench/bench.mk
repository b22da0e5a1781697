# SPDX-License-Identifier: Apache-2.0
# The benchmarks: `make bench` runs the quick matrix (a few minutes; fits a
# 24 GiB, 2-core machine), `make bench FULL=1` the bigger one. Both write
# bench/results/latest.json, docs/benchmarks.md and docs/bench_*.png. As
# root the run sets the THP knobs and the HugeTLB pool its cases need and
# puts back what it found. Included by the top-level Makefile.
BENCH_ARGS ?=
PYTHON ?= /usr/bin/python3

.PHONY: bench bench-deps bench-report

bench-deps: deps
	@sh bench/install-deps.sh

bench: bench-deps all python
	$(PYTHON) bench/run.py --build $(BUILD) $(if $(FULL),--full) $(BENCH_ARGS)

# The report and plots again, from bench/results/latest.json as it is.
bench-report:
	$(PYTHON) bench/report.py
