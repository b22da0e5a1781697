# SPDX-License-Identifier: Apache-2.0
# The reliability campaign's targets, included by the top-level Makefile.
#   make test-netns    the two-host group (network namespaces, gloo over TCP);
#                      part of make test (before the Python tests, whose
#                      summary line ends its output)
#   make fuzz          every fuzz target for FUZZ_SECONDS from the committed
#                      corpus (clang, ASan+UBSan); new inputs stay in
#                      $(ASAN_BUILD)/fuzz/NAME/new
#   make fuzz-merge    folds those into tests/fuzz/corpus/NAME, minimised
#   make reliability   the whole campaign at a larger scale than make test,
#                      then rewrites docs/reliability.md from what it measured
# Run the campaign alone on the host (it measures host-wide memory), as root:
#   flock /tmp/sharedseg-host.lock make reliability

FUZZ_SECONDS ?= 60
RELIABILITY_FUZZ_SECONDS ?= 120
FUZZ_TARGETS = $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))

.PHONY: test-netns fuzz fuzz-build fuzz-merge reliability

# 77 is a skip: only where network namespaces cannot be created.
test-netns: all python
	@rc=0; SSEG_BUILD_DIR=$(abspath $(BUILD)) $(PYTHON) tests/netns/twohosts.py || rc=$$?; \
	if [ $$rc = 77 ]; then echo "test-netns: skipped"; else exit $$rc; fi

fuzz-build: $(ASAN_BUILD)/CMakeCache.txt
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))

fuzz: fuzz-build
	@failed=""; for t in $(FUZZ_TARGETS); do \
		w=$(ASAN_BUILD)/fuzz/$$t; mkdir -p $$w/new $$w/artifacts; \
		echo "== fuzz_$$t for $(FUZZ_SECONDS) s (log: $$w/fuzz.log)"; \
		$(ASAN_BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=20 \
			-rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=$$w/artifacts/ \
			$$w/new tests/fuzz/corpus/$$t > $$w/fuzz.log 2>&1 || failed="$$failed $$t"; \
		grep -E "^(Done |SUMMARY)|invariant broken|runtime error" $$w/fuzz.log; \
	done; \
	if [ -n "$$failed" ]; then \
		echo "fuzz: findings in$$failed (inputs under $(ASAN_BUILD)/fuzz/*/artifacts)"; \
		exit 1; \
	fi

fuzz-merge: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
		$(ASAN_BUILD)/fuzz/fuzz_$$t -merge=1 tests/fuzz/corpus/$$t \
			$(ASAN_BUILD)/fuzz/$$t/new 2>&1 | grep -E "MERGE-OUTER: [0-9]+ new files" || true; \
	done

reliability: all python fuzz-build
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	$(PYTHON) tests/reliability/campaign.py --build $(BUILD) --asan-build $(ASAN_BUILD) \
		--fuzz-seconds $(RELIABILITY_FUZZ_SECONDS) --out docs/reliability.md
