/* A segment whose teardown keeps failing (cuMemUnmap refused every time)
 * goes to the cleanup-pending list: counted, logged with base, length, stage
 * and the driver's error at most once per interval, retried by later
 * creates, and never in the way of an unrelated segment. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fakeutil.h"
#include "testutil.h"

static sseg_t *solo(const char *name, enum sseg_backend backend)
{
	SSEG_OPTS(o, .name = name, .size = 2 << 20, .world_size = 1, .backend = backend,
		  .pages = backend == SSEG_BACKEND_MEMFD ? SSEG_PAGES_BASE : SSEG_PAGES_AUTO);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), 0);
	return seg;
}

static int count_lines(const char *path, const char *needle, char *first, size_t len)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle) && n++ == 0)
			snprintf(first, len, "%s", line);
	fclose(f);
	return n;
}

int main(void)
{
	char log[] = "/tmp/sseg-pending-XXXXXX", first[1024] = "";
	int saved = dup(2), fd = mkstemp(log);
	struct tu_fake fake;
	sseg_t *seg;

	CHECK(fd >= 0 && saved >= 0);
	tu_fake_load("devices=1;numa=0", &fake);
	seg = solo("pending", SSEG_BACKEND_CUDA);
	dup2(fd, 2); /* the library logs to stderr */
	fake.fail("cuMemUnmap", 1, -1, 999);
	CHECK_RC(sseg_destroy(seg), -EIO);
	CHECK_ERR_HAS("cuMemUnmap failed: CUDA_ERROR_UNKNOWN");
	CHECK_RC(sseg_destroy(seg), -EIO);
	CHECK(sseg_cleanup_pending() == 0);
	CHECK_RC(sseg_destroy(seg), -EINPROGRESS);
	CHECK(sseg_cleanup_pending() == 1);
	/* Unrelated creates go on; each retries the pending one, in vain. */
	for (int i = 0; i < 3; i++) {
		sseg_t *other = solo("unrelated", i == 1 ? SSEG_BACKEND_CUDA : SSEG_BACKEND_MEMFD);

		CHECK(sseg_cleanup_pending() == 1);
		fake.fail(NULL, 0, 0, 0);
		CHECK_RC(sseg_destroy(other), 0);
		fake.fail("cuMemUnmap", 1, -1, 999);
	}
	fflush(stderr);
	dup2(saved, 2);
	CHECK(count_lines(log, "pending cleanup", first, sizeof(first)) == 1);
	fprintf(stderr, "logged once: %s", first);
	CHECK(strstr(first, "segment 'pending' (base 0x"));
	CHECK(strstr(first, "2097152 bytes"));
	CHECK(strstr(first, "in destroy"));
	CHECK(strstr(first, "cuMemUnmap failed: CUDA_ERROR_UNKNOWN"));
	/* The driver recovers: the next create finishes the teardown. */
	fake.fail(NULL, 0, 0, 0);
	CHECK_RC(sseg_destroy(solo("after", SSEG_BACKEND_MEMFD)), 0);
	CHECK(sseg_cleanup_pending() == 0);
	CHECK(tu_fake_clean(&fake));
	unlink(log);
	printf("cuda_pending: ok\n");
	return 0;
}
