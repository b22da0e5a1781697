/* SPDX-License-Identifier: Apache-2.0 */
/* The `sharedseg` command line with the fake ACL runtime, as a user would
 * point it at a runtime: `make` built build/libsseg_fake_acl.so; with
 * SHAREDSEG_ACL_LIBRARY naming it, `probe --json` reports the ascend backend
 * available (not on NPUs attached over PCIe, and it says why), and a
 * 4-rank demo shares one 256 MiB copy and verifies it, with the in-server
 * handle and with fabric handles; a memfd demo pins its ranks' mappings
 * through aclrtHostRegister. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aclutil.h"
#include "testutil.h"

#define OUT_MAX (256 * 1024)

static char out[OUT_MAX];

/* Runs the built tool; its stdout in out, its exit status returned. */
static int sharedseg(const char *args)
{
	char cmd[1024];
	size_t n = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "%s %s", tu_build_file("sharedseg"), args);
	fprintf(stderr, "+ %s\n", cmd);
	p = popen(cmd, "r");
	CHECK(p);
	while (n < sizeof(out) - 1 && !feof(p))
		n += fread(out + n, 1, sizeof(out) - 1 - n, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The text of "key": inside the object that "section": opens. */
static const char *field(const char *section, const char *key)
{
	char pattern[96];
	const char *at = strstr(out, section);

	snprintf(pattern, sizeof(pattern), "\"%s\": ", key);
	at = at ? strstr(at, pattern) : NULL;
	return at ? at + strlen(pattern) : "";
}

static void probe(void)
{
	CHECK(sharedseg("probe --json") == 0);
	CHECK(!strncmp(field("\"ascend\": {", "available"), "true", 4));
	CHECK(!strncmp(field("\"ascend\": {", "driver_version"), "1015000", 7));
	CHECK(!strncmp(field("\"ascend\": {", "host_vmm_works"), "true", 4));
	CHECK(strstr(field("\"ascend\": {", "driver"), "libsseg_fake_acl.so"));
	CHECK(sharedseg("probe") == 0);
	CHECK(strstr(out, "ascend"));
}

/* NPUs on PCIe (hccs=0): the backend is not available, the probe says
 * why and what serves them, and a demo on it fails saying the same. */
static void probe_pcie(void)
{
	setenv("SSEG_FAKE_ACL", "devices=2;hccs=0", 1);
	CHECK(sharedseg("probe --json") == 0);
	CHECK(!strncmp(field("\"ascend\": {", "available"), "false", 5));
	CHECK(!strncmp(field("\"ascend\": {", "reason"), "\"not available: device 0 ", 25));
	CHECK(strstr(field("\"ascend\": {", "reason"), "over HCCS only, not PCIe"));
	CHECK(!strncmp(field("\"ascend\": {", "host_vmm_works"), "false", 5));
	CHECK(!strncmp(field("\"ascend\": {", "host_register"), "true", 4));
	CHECK(sharedseg("probe") == 0);
	CHECK(strstr(out, "ascend  no   not available: device 0"));
	CHECK(strstr(out, "backend=memfd with SSEG_F_HOST_REGISTER"));
	CHECK(sharedseg("demo --backend ascend --ranks 2 --size 64MiB 2>&1") != 0);
	CHECK(strstr(out, "over HCCS only, not PCIe"));
}

static void demo(const char *config)
{
	long long used;

	setenv("SSEG_FAKE_ACL", config, 1);
	CHECK(sharedseg("demo --backend ascend --ranks 4 --size 256MiB --json") == 0);
	CHECK(strstr(out, "\"backend\": \"ascend\""));
	CHECK(!strncmp(field("\"ranks\"", "verified"), "true", 4));
	CHECK(!strstr(out, "\"verified\": false"));
	used = strtoll(field("\"ranks\"", "host_bytes_used"), NULL, 10);
	fprintf(stderr, "host_bytes_used %lld for a 256 MiB segment (%s)\n", used, config);
	/* One copy host-wide, not four. */
	CHECK(used >= (256ll << 20) * 9 / 10 && used <= (256ll << 20) * 11 / 10);
}

static void host_register(void)
{
	setenv("SSEG_FAKE_ACL", "devices=2", 1);
	setenv("SHAREDSEG_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
	CHECK(sharedseg("demo --ranks 2 --size 64MiB --pages base --host-register --gpus 2 "
			"--json") == 0);
	CHECK(!strncmp(field("\"ranks\"", "verified"), "true", 4));
	unsetenv("SHAREDSEG_CUDA_LIBRARY");
}

int main(void)
{
	const char *fake = ta_fake_path();

	CHECK(access(fake, R_OK) == 0); /* `make` built it */
	setenv("SHAREDSEG_ACL_LIBRARY", fake, 1);
	setenv("SSEG_FAKE_ACL", "devices=2;version=1.15.0", 1);
	probe();
	probe_pcie();
	demo("devices=2");
	demo("devices=2;fabric=1");
	host_register();
	printf("ascend_cli: ok\n");
	return 0;
}
