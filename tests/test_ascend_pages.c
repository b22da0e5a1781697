/* SPDX-License-Identifier: Apache-2.0 */
/* 1 GiB pages for a fabric segment of a whole number of GiB, as a driver
 * may take them: the fake refuses 1 GiB host pages at allocation
 * (huge1g=0), at the map, the access grant or the export
 * (huge1g=map|access|export), or takes them (huge1g=1). The probe tries
 * what create will use (1 GiB pages on one GiB), so a refusal at any step
 * puts the segment on 2 MiB pages from the start, and says why; a step of
 * create's own that fails where the probe passed is retried on 2 MiB
 * pages, what the 1 GiB attempt took released exactly once, and logged.
 * One child per case. */
#define _GNU_SOURCE /* memmem */
#include <string.h>

#include "aclutil.h"
#include "runcases.h"
#include "testutil.h"

#define GIB (1ull << 30)
#define PAGE_2M (2ull << 20)
#define INJECTED 207001 /* ACL_ERROR_RT_MEMORY_ALLOCATION */

static struct ta_fake fake;
static char log_text[16384];

static void capture(enum sseg_log_level level, const char *message, void *ctx)
{
	size_t used = strlen(log_text);

	(void)level;
	(void)ctx;
	snprintf(log_text + used, sizeof(log_text) - used, "%s\n", message);
}

/* A line of the log that holds both a and b. */
static int logged(const char *a, const char *b)
{
	for (const char *line = log_text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);

		if (memmem(line, len, a, strlen(a)) && memmem(line, len, b, strlen(b)))
			return 1;
		line += len + (end != NULL);
	}
	fprintf(stderr, "no line with \"%s\" and \"%s\" in:\n%s", a, b, log_text);
	return 0;
}

static void load(const char *huge1g)
{
	char config[64];

	snprintf(config, sizeof(config), "fabric=1;huge1g=%s", huge1g);
	ta_fake_load(config, &fake);
	log_text[0] = '\0';
	sseg_set_log(capture, NULL);
	sseg_set_log_level(SSEG_LOG_INFO);
}

static int solo(sseg_t **seg)
{
	SSEG_OPTS(o, .name = "acl-1g", .size = GIB, .world_size = 1,
		  .backend = SSEG_BACKEND_ASCEND);
	unsigned char blob[SSEG_BLOB_SIZE];
	int rc = sseg_create(&o, seg, blob);

	return rc ? rc : sseg_complete(*seg, blob);
}

/* A whole fabric segment on pages of this size, its last byte written. */
static void check_pages(sseg_t *seg, uint64_t page)
{
	struct sseg_info info = { .sz = sizeof(info) };

	CHECK_RC(sseg_info(seg, &info), 0);
	CHECK(info.page_size == page && info.mapped_size == GIB);
	CHECK(!strcmp(info.handle_type, "acl-fabric"));
	CHECK(strstr(info.pages_reason, page == GIB ? "ACL_MEM_P2P_HUGE1G" : "ACL_MEM_P2P_HUGE,"));
	((unsigned char *)sseg_base(seg))[GIB - 1] = 1;
}

/* huge1g=1: the probe passes, the segment is on 1 GiB pages. */
static int taken(void *arg)
{
	sseg_t *seg;

	(void)arg;
	load("1");
	CHECK_RC(solo(&seg), 0);
	check_pages(seg, GIB);
	CHECK_RC(sseg_destroy(seg), 0);
	CHECK(ta_fake_clean(&fake));
	return 0;
}

/* Refused at one step (arg: huge1g's value; what the log names): 2 MiB
 * pages, create makes no attempt on 1 GiB pages of its own, and the next
 * segment asks no probe again. */
static int refused(void *arg)
{
	const char *const *step = arg;
	long mallocs;
	sseg_t *seg;

	load(step[0]);
	mallocs = fake.calls("aclrtMallocPhysical");
	CHECK_RC(solo(&seg), 0);
	check_pages(seg, PAGE_2M);
	CHECK(logged("a probe of 1 GiB fabric pages was refused", step[1]));
	/* The fabric probe on 2 MiB, the 1 GiB one (unless its granularity was
	 * refused), the segment; the in-server probe ran in load. */
	CHECK(fake.calls("aclrtMallocPhysical") - mallocs == (strcmp(step[0], "0") ? 3 : 2));
	CHECK_RC(sseg_destroy(seg), 0);
	mallocs = fake.calls("aclrtMallocPhysical");
	CHECK_RC(solo(&seg), 0);
	CHECK(fake.calls("aclrtMallocPhysical") - mallocs == 1);
	check_pages(seg, PAGE_2M);
	CHECK_RC(sseg_destroy(seg), 0);
	CHECK(ta_fake_clean(&fake));
	return 0;
}

/* The probe passed; create's own step (arg: the call) fails on 1 GiB
 * pages: the attempt is released (its handle freed once) and made again
 * on 2 MiB pages, and the log says why. */
static int retried(void *arg)
{
	const char *entry = arg;
	long frees;
	sseg_t *seg;

	load("1");
	CHECK_RC(solo(&seg), 0); /* the probes answer, and are kept */
	check_pages(seg, GIB);
	CHECK_RC(sseg_destroy(seg), 0);
	frees = fake.calls("aclrtFreePhysical");
	fake.fail(entry, 1, 1, INJECTED);
	CHECK_RC(solo(&seg), 0);
	fake.fail(NULL, 0, 0, 0);
	check_pages(seg, PAGE_2M);
	CHECK(fake.calls("aclrtFreePhysical") - frees == !!strcmp(entry, "aclrtMallocPhysical"));
	CHECK(fake.live_handles() == 1 && fake.live_reservations() == 1 &&
	      fake.live_mappings() == 1);
	CHECK(logged("1 GiB pages (ACL_MEM_P2P_HUGE1G) failed", entry));
	CHECK(logged("trying again on 2 MiB pages", "ACL_ERROR_RT_MEMORY_ALLOCATION"));
	CHECK_RC(sseg_destroy(seg), 0);
	CHECK(ta_fake_clean(&fake) && fake.bugs() == 0);
	return 0;
}

/* The 1 GiB attempt's handle cannot be freed: abandoned once (counted,
 * never freed again), no second attempt over what is left; the failed
 * create releases the rest, and the next create succeeds. */
static int release_fails(void *arg)
{
	uint64_t abandoned;
	long frees;
	sseg_t *seg;

	(void)arg;
	load("1");
	CHECK_RC(solo(&seg), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	abandoned = sseg_abandoned_handles();
	frees = fake.calls("aclrtFreePhysical");
	fake.fail("aclrtMemSetAccess", 1, 1, INJECTED);
	fake.fail("aclrtFreePhysical", 1, 1, INJECTED);
	CHECK_RC(solo(&seg), -ENOMEM);
	CHECK_ERR_HAS("was abandoned");
	fake.fail(NULL, 0, 0, 0);
	CHECK(fake.calls("aclrtFreePhysical") - frees == 1);
	CHECK(sseg_abandoned_handles() == abandoned + 1);
	CHECK(fake.live_handles() == 1 && fake.live_reservations() == 0 &&
	      fake.live_mappings() == 0 && fake.live_devices() == 0 && fake.bugs() == 0);
	CHECK_RC(solo(&seg), 0);
	check_pages(seg, GIB);
	CHECK_RC(sseg_destroy(seg), 0);
	return 0;
}

static const char *const at_malloc[] = { "0", "1 GiB host pages are not supported" };
static const char *const at_map[] = { "map", "aclrtMapMem" };
static const char *const at_access[] = { "access", "aclrtMemSetAccess" };
static const char *const at_export[] = { "export", "aclrtMemExportToShareableHandleV2" };

static const struct tu_case cases[] = {
	{ "taken", taken, NULL, 0 },
	{ "refused at allocation", refused, (void *)at_malloc, 0 },
	{ "refused at map", refused, (void *)at_map, 0 },
	{ "refused at access", refused, (void *)at_access, 0 },
	{ "refused at export", refused, (void *)at_export, 0 },
	{ "create's allocation fails", retried, "aclrtMallocPhysical", 0 },
	{ "create's reservation fails", retried, "aclrtReserveMemAddress", 0 },
	{ "create's map fails", retried, "aclrtMapMem", 0 },
	{ "create's access fails", retried, "aclrtMemSetAccess", 0 },
	{ "create's export fails", retried, "aclrtMemExportToShareableHandleV2", 0 },
	{ "the attempt's release fails", release_fails, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	if (tu_run_cases(argc, argv, cases))
		return 1;
	printf("ascend_pages: ok\n");
	return 0;
}
