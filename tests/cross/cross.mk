# SPDX-License-Identifier: Apache-2.0
# make test-aarch64: the C library's tests cross-built for aarch64 with Zig
# (glibc 2.28's symbols) and run under qemu-user (tests/cross/run.sh).
# Included by the top-level Makefile.
AARCH64_BUILD ?= build-aarch64

.PHONY: test-aarch64
test-aarch64:
	@sh tools/install-deps.sh cross
	JOBS=$(JOBS) sh tests/cross/run.sh $(AARCH64_BUILD)
