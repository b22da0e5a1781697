/* SPDX-License-Identifier: Apache-2.0 */
/* tests/gpu/run.sh and gpu_check, run through the fake CUDA driver: every
 * step reports, every line of gpu.jsonl is one JSON object, the fake agrees
 * with what gpu_check expects of the real driver, and a driver that cannot
 * be loaded fails the checks that need it without stopping the rest. What
 * only a GPU can tell (the numbers, the real driver's answers) is left to
 * the GPU run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char out_dir[] = "/tmp/sseg-gpu-check-XXXXXX";
static char jsonl[256];

/* Runs the script with the build's gpu_check and this driver; its exit. */
static int run_script(const char *driver)
{
	char env[1024];

	snprintf(env, sizeof(env),
		 "SSEG_GPU_BUILD='%s' SHAREDSEG_CUDA_LIBRARY='%s' "
		 "SSEG_FAKE_CUDA='devices=3;numa=0,0;nopeer=0-2' "
		 "SSEG_GPU_SIZE=16MiB SSEG_GPU_REG_SIZE=8MiB SSEG_GPU_REPS=2 "
		 "SSEG_GPU_RANKS=2 SSEG_GPU_POOL=0 SSEG_GPU_PAGES=base SSEG_GPU_BUDGET=120 "
		 "SSEG_GPU_PIN_SIZES='8MiB 16MiB' SSEG_GPU_POP_SIZES=16MiB SSEG_GPU_TORCH=0",
		 getenv("SSEG_BUILD_DIR"), driver);
	return tu_run_script("tests/gpu/run.sh", out_dir, env);
}

/* Lines of gpu.jsonl containing every needle; -1 if one is not an object. */
static int count(const char *needle, const char *also)
{
	return tu_jsonl_count(jsonl, needle, also);
}

static void check_fake_run(const char *fake)
{
	CHECK(run_script(fake) == 0);
	CHECK(count("\"check\": \"cuda_abi\"", NULL) == 1);
	CHECK(count("\"check\": \"cuda_abi\"", "\"result\": \"fail\"") == 0);
	CHECK(count("\"check\": \"machine\"", "\"gvisor\": ") == 1);
	CHECK(count("\"check\": \"driver\"", "\"result\": \"pass\"") == 1);
	CHECK(count("\"check\": \"rule\"", "\"matches_fake\": true") >= 27);
	CHECK(count("\"matches_fake\": false", NULL) == 0);
	/* What the library changed against the strict fake has its rule. */
	CHECK(count("\"rule\": \"access_own_device_alone\"", NULL) == 1);
	CHECK(count("\"rule\": \"access_peer_device\"", NULL) == 1);
	CHECK(count("\"rule\": \"access_no_peer_device\"", "\"result\": \"CUDA_SUCCESS\"") == 1);
	CHECK(count("\"rule\": \"fabric_fd_host_numa_create\"", NULL) == 1);
	CHECK(count("\"rule\": \"register_read_only_mapping_plain\"", NULL) == 1);
	CHECK(count("\"rule\": \"ctx_synchronize_no_context\"", NULL) == 1);
	CHECK(count("\"check\": \"library_probe\"", "\"host_vmm_works\": 1") == 3);
	CHECK(count("\"check\": \"variant\"", "\"result\": \"pass\"") == 4);
	/* 2 directions x 4 block sizes x (memfd, cuda owner, cuda import,
	 * cuMemHostAlloc, malloc) */
	CHECK(count("\"schema\": 1", "_kv_block") == 40);
	CHECK(count("\"check\": \"memory_type\"", "\"torch_is_pinned\": true") == 6);
	CHECK(count("\"check\": \"memory_type\"", "\"mechanism\": \"malloc\"") == 2);
	CHECK(count("\"bench\": \"host_register_time\"", "\"ranks\": 2") == 1);
	CHECK(count("\"check\": \"register\"", "\"result\": \"skipped\"") == 1);
	/* register and VMM create + export + import, at each size */
	CHECK(count("\"check\": \"pinning\"", "\"result\": \"pass\"") == 4);
	CHECK(count("\"check\": \"pinning\"", "\"pin_s_per_gib\"") == 4);
	/* 1 file and one per core, on base, THP and HugeTLB pages: base always
	 * runs; THP and HugeTLB as the host's knobs and pool allow (make
	 * test-host-states changes them), else skipped, never refused. */
	CHECK(count("\"check\": \"populate\"", "\"result\": \"pass\"") >= 2);
	CHECK(count("\"check\": \"populate\"", "\"result\": \"pass\"") +
		      count("\"check\": \"populate\"", "\"result\": \"skipped\"") == 6);
	CHECK(count("\"check\": \"populate\"", NULL) == 6);
	CHECK(count("\"check\": \"nccl\"", NULL) == 1);
	CHECK(count("\"check\": \"summary\"", "\"failed\": 0") == 1);
}

/* No driver: the checks that need one fail; the others still report. */
static void check_no_driver(void)
{
	CHECK(run_script("/nonexistent/libcuda.so.1") == 1);
	CHECK(count("\"check\": \"driver\"", "\"result\": \"fail\"") == 1);
	CHECK(count("\"check\": \"os\"", NULL) >= 5);
	CHECK(count("\"step\": \"variants\"", "\"result\": \"fail\"") == 1);
	CHECK(count("\"step\": \"register\"", NULL) == 1);
	CHECK(count("\"step\": \"pinning\"", "\"result\": \"fail\"") == 1);
	CHECK(count("\"step\": \"populate\"", "\"result\": \"pass\"") == 1);
	CHECK(count("\"check\": \"nccl\"", NULL) == 1);
	CHECK(count("\"check\": \"summary\"", NULL) == 1);
}

int main(void)
{
	char fake[512];

	if (system("command -v bash >/dev/null && command -v timeout >/dev/null") != 0) {
		fprintf(stderr, "bash or timeout is missing\n");
		return TU_SKIP;
	}
	/* The script writes the THP and HugeTLB knobs back to see whether it
	 * may: no other test may change them meanwhile. */
	tu_lock_machine();
	CHECK(mkdtemp(out_dir));
	snprintf(jsonl, sizeof(jsonl), "%s/gpu.jsonl", out_dir);
	snprintf(fake, sizeof(fake), "%s", tu_build_file("libsseg_fake_cuda.so"));
	check_fake_run(fake);
	check_no_driver();
	snprintf(fake, sizeof(fake), "rm -rf '%s'", out_dir);
	CHECK(system(fake) == 0);
	printf("gpu_check: ok\n");
	return 0;
}
