/* SPDX-License-Identifier: Apache-2.0 */
/* HugeTLB pages in use, every pool (hugetlb_use.h). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "os/hugetlb_use.h"

static uint64_t pool_count(const char *dir, const char *pool, const char *file)
{
	char path[512];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, pool, file);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

int sseg_os_hugetlb_in_use(const char *dir, uint64_t *bytes)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	*bytes = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		uint64_t kb, total, free_pages;

		if (sscanf(e->d_name, "hugepages-%" SCNu64 "kB", &kb) != 1)
			continue;
		total = pool_count(dir, e->d_name, "nr_hugepages");
		free_pages = pool_count(dir, e->d_name, "free_hugepages");
		if (total > free_pages)
			*bytes += (total - free_pages) * kb * 1024;
	}
	closedir(d);
	return 0;
}
