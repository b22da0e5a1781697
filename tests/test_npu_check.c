/* SPDX-License-Identifier: Apache-2.0 */
/* tests/npu/run.sh and npu_check, run through the fake ACL runtime with the
 * build's binaries: every step reports, every line of npu.jsonl is one JSON
 * object, each says the runtime was the fake, the demos and the shares of
 * each handle type pass, and nothing fails; a runtime that cannot be loaded
 * fails the steps that need it without stopping the rest. What only an NPU
 * can tell (its runtime's answers, the copies' bandwidth: the fake has no
 * aclrtMemcpy) is left to the NPU run. */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

static char out_dir[] = "/tmp/sseg-npu-check-XXXXXX";
static char jsonl[256];

/* Runs the script with the build's binaries and this runtime; its exit. */
static int run_script(const char *runtime)
{
	char env[1024];

	snprintf(env, sizeof(env),
		 "SSEG_NPU_BUILD='%s' SHAREDSEG_ACL_LIBRARY='%s' SSEG_FAKE_ACL='devices=2;fabric=1' "
		 "ASCEND_TOOLKIT_HOME=/nonexistent SSEG_NPU_SIZE=8MiB SSEG_NPU_REPS=1 "
		 "SSEG_NPU_STEP_S=60 SSEG_NPU_BUDGET=120",
		 getenv("SSEG_BUILD_DIR"), runtime);
	return tu_run_script("tests/npu/run.sh", out_dir, env);
}

/* Lines of npu.jsonl holding every needle; -1 if one is not an object. */
static int count(const char *needle, const char *also)
{
	return tu_jsonl_count(jsonl, needle, also);
}

#define PASSED(step) count("\"check\": \"" step "\"", "\"outcome\": \"pass\"")

static void check_fake_run(const char *fake)
{
	char cmd[300];

	CHECK(run_script(fake) == 0);
	CHECK(count("\"check\": \"environment\"", "\"fake_runtime\": true, \"result\"") == 1);
	CHECK(count("\"fake_runtime\": true", NULL) == 12);
	/* The stack checks: every answer the one the backend expects. */
	CHECK(PASSED("stack") == 1);
	CHECK(count("\"check\": \"stack\"", "\"check\": \"stack-f2-device-peer\"") == 1);
	CHECK(count("\"as_expected\": false", NULL) == 0);
	CHECK(count("\"fake_runtime\": false", NULL) == 0);
	CHECK(count("\"check\": \"build\"", "using ") == 1);
	CHECK(count("\"check\": \"probe\"", "libsseg_fake_acl.so") == 1);
	CHECK(PASSED("probe") == 1);
	/* No acl_rt.h here: skipped, not failed. */
	CHECK(count("\"check\": \"abi\"", "\"outcome\": \"skipped\"") == 1);
	CHECK(PASSED("demo-default-handle") == 1);
	CHECK(PASSED("demo-trust-list") == 1);
	CHECK(PASSED("demo-host-register") == 1);
	/* Both ranks of each share, on the handle each step asks for. */
	CHECK(count("\"check\": \"share-default-handle\"", "\"handle_type\": \"acl-fabric\"") == 1);
	CHECK(count("\"check\": \"share-trust-list\"", "\"handle_type\": \"acl-trustlist\"") == 1);
	CHECK(count("\"check\": \"share-host-register\"", "\"registered_chunks\": 1") == 1);
	CHECK(count("\"check\": \"share\", ", "\"verified\": true") == 3);
	CHECK(count("\"verified\": false", NULL) == 0);
	CHECK(count("\"copies_skipped\": \"the ACL runtime", "lacks aclrtMalloc") == 3);
	CHECK(count("\"outcome\": \"fail\"", NULL) == 0);
	CHECK(count("\"check\": \"summary\"", "\"failed\": 0, \"skipped\": 1") == 1);
	/* The printed summary says so too. */
	snprintf(cmd, sizeof(cmd), "grep -q 'no NPU took part' '%s/stdout'", out_dir);
	CHECK(tu_shell(cmd) == 0);
}

/* No runtime: the steps that need one fail; the others still report. */
static void check_no_runtime(void)
{
	CHECK(run_script("/nonexistent/libascendcl.so") == 1);
	CHECK(count("\"fake_runtime\": true", NULL) == 0);
	CHECK(PASSED("environment") == 1);
	CHECK(PASSED("probe") == 1);
	CHECK(count("\"check\": \"demo-default-handle\"", "\"outcome\": \"fail\"") == 1);
	CHECK(count("\"check\": \"share-host-register\"", "\"outcome\": \"fail\"") == 1);
	CHECK(count("\"check\": \"share-host-register\"", "no ACL runtime") == 1);
	CHECK(count("\"check\": \"summary\"", "\"failed\": 7") == 1); /* stack, 3 demos, 3 shares */
}

int main(void)
{
	char fake[512];

	if (system("command -v bash >/dev/null && command -v timeout >/dev/null") != 0) {
		fprintf(stderr, "bash or timeout is missing\n");
		return TU_SKIP;
	}
	CHECK(mkdtemp(out_dir));
	snprintf(jsonl, sizeof(jsonl), "%s/npu.jsonl", out_dir);
	snprintf(fake, sizeof(fake), "%s", tu_build_file("libsseg_fake_acl.so"));
	check_fake_run(fake);
	check_no_runtime();
	snprintf(fake, sizeof(fake), "rm -rf '%s'", out_dir);
	CHECK(system(fake) == 0);
	printf("npu_check: ok\n");
	return 0;
}
