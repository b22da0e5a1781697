/* SPDX-License-Identifier: Apache-2.0 */
/* What a caller leaves to the operator, resolved once in the library: the
 * environment's defaults (SHAREDSEG_PAGES, SHAREDSEG_NUMA,
 * SHAREDSEG_POPULATE: set, blank, padded, unset) and the population's
 * allowance; and the C tool taking them, an option it is given winning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

static void defaults(void)
{
	const char *source = NULL;
	char text[64];

	unsetenv("SHAREDSEG_PAGES");
	CHECK_RC(sseg_setting_default("pages", text, sizeof(text), &source), 0);
	CHECK(!strcmp(text, "auto") && !strcmp(source, "default"));
	setenv("SHAREDSEG_PAGES", "  thp \n", 1);
	CHECK_RC(sseg_setting_default("pages", text, sizeof(text), &source), 0);
	CHECK(!strcmp(text, "thp") && !strcmp(source, "SHAREDSEG_PAGES"));
	setenv("SHAREDSEG_PAGES", " \t", 1); /* blank: as unset */
	CHECK_RC(sseg_setting_default("pages", text, sizeof(text), &source), 0);
	CHECK(!strcmp(text, "auto") && !strcmp(source, "default"));
	setenv("SHAREDSEG_NUMA", "1", 1);
	CHECK_RC(sseg_setting_default("numa", text, sizeof(text), &source), 0);
	CHECK(!strcmp(text, "1") && !strcmp(source, "SHAREDSEG_NUMA"));
	unsetenv("SHAREDSEG_POPULATE");
	CHECK_RC(sseg_setting_default("populate", text, sizeof(text), &source), 0);
	CHECK(!strcmp(text, "owner"));
	CHECK_RC(sseg_setting_default("backend", text, sizeof(text), &source), -EINVAL);
	CHECK_ERR_HAS("'backend' is no setting with an operator's default (pages, numa, populate)");
	setenv("SHAREDSEG_PAGES", "hugetlb-2M", 1);
	CHECK_RC(sseg_setting_default("pages", text, 4, &source), -ENAMETOOLONG);
	CHECK_ERR_HAS("SHAREDSEG_PAGES holds 10 bytes, more than 3");
	unsetenv("SHAREDSEG_PAGES");
	unsetenv("SHAREDSEG_NUMA");
}

static void allowance(void)
{
	CHECK(sseg_population_allowance_ms(1ull << 30, SSEG_PAGES_BASE, SSEG_POPULATE_OWNER) == 2000);
	CHECK(sseg_population_allowance_ms(1ull << 30, SSEG_PAGES_AUTO, SSEG_POPULATE_SPREAD) ==
	      2000);
	CHECK(sseg_population_allowance_ms(4ull << 30, SSEG_PAGES_THP, SSEG_POPULATE_OWNER) == 4000);
	CHECK(sseg_population_allowance_ms(4ull << 30, SSEG_PAGES_HUGETLB_2M,
					   SSEG_POPULATE_OWNER) == 4000);
	CHECK(sseg_population_allowance_ms(64ull << 30, SSEG_PAGES_BASE, SSEG_POPULATE_LAZY) == 0);
	CHECK(sseg_population_allowance_ms(64ull << 30, SSEG_PAGES_BASE,
					   SSEG_POPULATE_BACKGROUND) == 0);
}

/* The demo's run as a user starts it, with one variable set; its stdout
 * and stderr together. */
static int demo(const char *assignment, const char *args, char *out, size_t len)
{
	char cmd[640];
	size_t n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "env -u SHAREDSEG_PAGES -u SHAREDSEG_NUMA -u "
		 "SHAREDSEG_POPULATE %s '%s' demo --ranks 2 --size 8MiB --json %s 2>&1",
		 assignment, tu_build_file("sharedseg"), args);
	p = popen(cmd, "r");
	CHECK(p != NULL);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	return pclose(p);
}

static void the_tool_takes_them(void)
{
	char out[16384];
	int status;

	status = demo("SHAREDSEG_PAGES=base SHAREDSEG_POPULATE=lazy", "", out, sizeof(out));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(strstr(out, "\"pages_requested\": \"base\"") && strstr(out, "\"populate\": \"lazy\""));
	status = demo("SHAREDSEG_PAGES=many", "", out, sizeof(out));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
	CHECK(strstr(out, "sharedseg demo: SHAREDSEG_PAGES: 'many' is not a page kind (use auto, "));
	/* An option the user gives wins over the variable. */
	status = demo("SHAREDSEG_PAGES=many", "--pages base", out, sizeof(out));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(strstr(out, "\"pages_requested\": \"base\""));
}

int main(void)
{
	defaults();
	allowance();
	the_tool_takes_them();
	printf("settings: ok\n");
	return 0;
}
