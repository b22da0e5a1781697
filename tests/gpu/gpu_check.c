/* SPDX-License-Identifier: Apache-2.0 */
/* Checks for a machine with an NVIDIA GPU, run by tests/gpu/run.sh. Every
 * subcommand prints JSON lines and goes on past a refusal: what the driver
 * or a sandbox refuses is a result, reported with the driver's error name.
 * The driver is loaded the way the library loads it (SHAREDSEG_CUDA_LIBRARY may
 * name the project's fake driver, honoured only when uid == euid), so
 * test_gpu_check runs every subcommand without a GPU.
 *
 *   gpu_check env                      driver, devices, attributes, peers;
 *                                      what the OS and the driver refuse,
 *                                      each next to what the fake answers
 *   gpu_check variants SIZE            quick sharing variants, 2 ranks each
 *   gpu_check copy SIZE REPS           H2D/D2H of KV blocks (16, 64, 256 KiB
 *                                      and one MLA block run, 1.07 MiB) from
 *                                      a registered memfd segment, a VMM
 *                                      segment (its owner, and its import
 *                                      in a second process), cuMemHostAlloc
 *                                      and malloc buffers; each buffer's
 *                                      memory type as the driver reports it
 *   gpu_check register SIZE REPS RANKS cuMemHostRegister time per rank,
 *                                      4 KiB against 2 MiB HugeTLB pages
 *   gpu_check pinning SIZE...          seconds per GiB: cuMemHostRegister
 *                                      of a memfd mapping against VMM
 *                                      create + export + import
 *   gpu_check populate SIZE...         one memfd against one per core under
 *                                      one mapping, a thread per core, on
 *                                      4 KiB, THP and HugeTLB pages (CPU only)
 *
 * Bench lines share the CPU benchmark's shape: {"schema": 1, "bench", ...}.
 * SSEG_GPU_PAGES (auto, base, thp, hugetlb-2M) sets the segments' pages;
 * base also skips the HugeTLB registration timing (tests use it to leave
 * the host's HugeTLB pool alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "copy.h"
#include "env.h"
#include "pinning.h"
#include "populate.h"
#include "register.h"
#include "sharedseg.h"
#include "variants.h"

static int usage(void)
{
	fprintf(stderr, "usage: gpu_check env | variants SIZE | copy SIZE REPS | "
			"register SIZE REPS RANKS | pinning SIZE... | populate SIZE...\n");
	return 2;
}

static int count_arg(const char *text, int max)
{
	int n = atoi(text);

	return n >= 1 && n <= max ? n : -1;
}

#define MAX_SIZES 8

/* pinning and populate: SIZE... (at least 4 MiB each). */
static int sizes_main(int argc, char **argv)
{
	unsigned long long sizes[MAX_SIZES];
	int n = argc - 2;

	if (n < 1 || n > MAX_SIZES)
		return usage();
	for (int i = 0; i < n; i++) {
		uint64_t size = 0;

		if (sseg_parse_size(argv[i + 2], &size) || size < 4 * MiB)
			return usage();
		sizes[i] = size;
	}
	return !strcmp(argv[1], "pinning") ? pinning_main(sizes, n) : populate_main(sizes, n);
}

int main(int argc, char **argv)
{
	uint64_t size = 0;
	int reps, ranks;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "env"))
		return env_main();
	if (argc >= 2 && (!strcmp(argv[1], "pinning") || !strcmp(argv[1], "populate")))
		return sizes_main(argc, argv);
	if (argc < 3 || sseg_parse_size(argv[2], &size) || size < 4 * MiB)
		return usage();
	if (argc == 3 && !strcmp(argv[1], "variants"))
		return variants_main(size);
	reps = argc >= 4 ? count_arg(argv[3], MAX_REPS) : -1;
	if (argc == 4 && !strcmp(argv[1], "copy") && reps > 0)
		return copy_main(size, reps);
	ranks = argc == 5 ? count_arg(argv[4], MAX_RANKS) : -1;
	if (argc == 5 && !strcmp(argv[1], "register") && reps > 0 && ranks > 0)
		return register_main(size, reps, ranks);
	return usage();
}
