/* SPDX-License-Identifier: Apache-2.0 */
/* A main() for the fuzz targets where libFuzzer is not linked (gcc, the
 * release build): runs every file of the directories (or files) named on
 * the command line through the target once, so the committed corpus is a
 * regression test in every build. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data;
	long size;

	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		perror(path);
		return -1;
	}
	data = malloc((size_t)size + 1);
	if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
		perror(path);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(data, (size_t)size);
	free(data);
	return 0;
}

static int run_dir(const char *dir, int *count)
{
	struct dirent *e;
	DIR *d = opendir(dir);
	char path[4096];

	if (!d) {
		perror(dir);
		return -1;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (run_file(path))
			return -1;
		(*count)++;
	}
	closedir(d);
	return 0;
}

int main(int argc, char **argv)
{
	int count = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (argv[i][0] == '-')
			continue; /* libFuzzer's options mean nothing here */
		if (stat(argv[i], &st) || (S_ISDIR(st.st_mode) ? run_dir(argv[i], &count)
							      : run_file(argv[i])))
			return 1;
		count += !S_ISDIR(st.st_mode);
	}
	printf("replayed %d input(s)\n", count);
	return count ? 0 : 1;
}
