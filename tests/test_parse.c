/* SPDX-License-Identifier: Apache-2.0 */
/* Names of option values, their parsers, and sizes with units. */
#include <errno.h>
#include <string.h>

#include "testutil.h"

static void test_names_round_trip(void)
{
	for (int v = SSEG_BACKEND_AUTO; v <= SSEG_BACKEND_ASCEND; v++) {
		enum sseg_backend b = (enum sseg_backend)-1;

		CHECK_RC(sseg_parse_backend(sseg_backend_name((enum sseg_backend)v), &b), 0);
		CHECK((int)b == v);
	}
	for (int v = SSEG_PAGES_AUTO; v <= SSEG_PAGES_HUGETLB_1G; v++) {
		enum sseg_pages p = (enum sseg_pages)-1;

		CHECK_RC(sseg_parse_pages(sseg_pages_name((enum sseg_pages)v), &p), 0);
		CHECK((int)p == v);
	}
	for (int v = SSEG_POPULATE_OWNER; v <= SSEG_POPULATE_LAZY; v++) {
		enum sseg_populate p = (enum sseg_populate)-1;

		CHECK_RC(sseg_parse_populate(sseg_populate_name((enum sseg_populate)v), &p), 0);
		CHECK((int)p == v);
	}
	CHECK(!strcmp(sseg_backend_name(SSEG_BACKEND_MEMFD), "memfd"));
	CHECK(!strcmp(sseg_pages_name(SSEG_PAGES_HUGETLB_2M), "hugetlb-2M"));
	CHECK(!strcmp(sseg_pages_name(SSEG_PAGES_HUGETLB_1G), "hugetlb-1G"));
	CHECK(!strcmp(sseg_numa_name(SSEG_NUMA_NONE), "none"));
	CHECK(!strcmp(sseg_numa_name(SSEG_NUMA_NODE), "node"));
	CHECK(!strcmp(sseg_numa_name(SSEG_NUMA_INTERLEAVE), "interleave"));
	CHECK(!strcmp(sseg_numa_name(SSEG_NUMA_DEVICE_LOCAL), "device-local"));
	CHECK(!strcmp(sseg_populate_name(SSEG_POPULATE_SPREAD), "spread"));
	CHECK(!strcmp(sseg_backend_name((enum sseg_backend)99), "unknown"));
	CHECK(!strcmp(sseg_pages_name((enum sseg_pages)-1), "unknown"));
}

static void test_pages_forms(void)
{
	static const struct {
		const char *text;
		enum sseg_pages pages;
	} ok[] = {
		{ "auto", SSEG_PAGES_AUTO },	       { "base", SSEG_PAGES_BASE },
		{ "THP", SSEG_PAGES_THP },	       { "hugetlb", SSEG_PAGES_HUGETLB_2M },
		{ "hugetlb-2M", SSEG_PAGES_HUGETLB_2M }, { "hugetlb-2m", SSEG_PAGES_HUGETLB_2M },
		{ "hugetlb-1G", SSEG_PAGES_HUGETLB_1G }, { "hugetlb-1g", SSEG_PAGES_HUGETLB_1G },
	};
	enum sseg_pages p;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		CHECK_RC(sseg_parse_pages(ok[i].text, &p), 0);
		CHECK(p == ok[i].pages);
	}
	CHECK_RC(sseg_parse_pages("hugetlb-4M", &p), -EINVAL);
	CHECK_ERR_HAS("unknown pages 'hugetlb-4M': expected auto, base, thp");
	CHECK_ERR_HAS("hugetlb-1G");
	CHECK_RC(sseg_parse_pages("", &p), -EINVAL);
	CHECK_RC(sseg_parse_pages(NULL, &p), -EINVAL);
}

static void test_other_names(void)
{
	enum sseg_backend b;
	enum sseg_populate pop;

	CHECK_RC(sseg_parse_backend("CUDA", &b), 0);
	CHECK(b == SSEG_BACKEND_CUDA);
	CHECK_RC(sseg_parse_backend("ascend", &b), 0);
	CHECK(b == SSEG_BACKEND_ASCEND);
	CHECK_RC(sseg_parse_backend("rocm", &b), -EINVAL);
	CHECK_ERR_HAS("unknown backend 'rocm': expected auto, memfd, cuda or ascend");
	CHECK_RC(sseg_parse_populate("Lazy", &pop), 0);
	CHECK(pop == SSEG_POPULATE_LAZY);
	CHECK_RC(sseg_parse_populate("eager", &pop), -EINVAL);
	CHECK_ERR_HAS("expected owner, spread, lazy or background");
}

static void test_numa(void)
{
	static const char *const bad[] = { "64", "-1", "1x", "", "node", "3.0", "999999999999" };
	enum sseg_numa numa;
	int node = 99;

	CHECK_RC(sseg_parse_numa("none", &numa, &node), 0);
	CHECK(numa == SSEG_NUMA_NONE && node == -1);
	CHECK_RC(sseg_parse_numa("interleave", &numa, &node), 0);
	CHECK(numa == SSEG_NUMA_INTERLEAVE);
	CHECK_RC(sseg_parse_numa("device-local", &numa, &node), 0);
	CHECK(numa == SSEG_NUMA_DEVICE_LOCAL);
	CHECK_RC(sseg_parse_numa("0", &numa, &node), 0);
	CHECK(numa == SSEG_NUMA_NODE && node == 0);
	CHECK_RC(sseg_parse_numa("63", &numa, &node), 0);
	CHECK(numa == SSEG_NUMA_NODE && node == 63);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_RC(sseg_parse_numa(bad[i], &numa, &node), -EINVAL);
		CHECK_ERR_HAS("a node number 0..63");
	}
	CHECK_RC(sseg_parse_numa("64", &numa, &node), -EINVAL);
	CHECK_ERR_HAS("'64'");
}

static void test_size_forms(void)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} ok[] = {
		{ "0", 0 },
		{ "4096", 4096 },
		{ "4096B", 4096 },
		{ "256MiB", 256ull << 20 },
		{ "256M", 256ull << 20 },
		{ "256m", 256ull << 20 },
		{ "256MB", 256ull << 20 },
		{ "256 MiB", 256ull << 20 },
		{ " 4G", 4ull << 30 },
		{ "4G ", 4ull << 30 },
		{ "\t1 GiB \t", 1ull << 30 },
		{ "256.0 MiB", 256ull << 20 }, /* as the tool prints sizes */
		{ "4G", 4ull << 30 },
		{ "4GiB", 4ull << 30 },
		{ "1.5GiB", 3ull << 29 },
		{ "1.50G", 3ull << 29 },
		{ "512KiB", 512ull << 10 },
		{ "512k", 512ull << 10 },
		{ "1T", 1ull << 40 },
		{ "2P", 2ull << 50 },
		{ "15E", 15ull << 60 },
		{ "0.5K", 512 },
		{ "1.0", 1 },
		{ "18446744073709551615", UINT64_MAX },
	};
	uint64_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 1;
		CHECK_RC(sseg_parse_size(ok[i].text, &v), 0);
		if (v != ok[i].bytes) {
			fprintf(stderr, "'%s' gave %llu\n", ok[i].text, (unsigned long long)v);
			exit(1);
		}
	}
}

static void expect_size_error(const char *text, int err, const char *needle)
{
	uint64_t v = 7;

	CHECK_RC(sseg_parse_size(text, &v), err);
	CHECK(v == 7);
	CHECK_ERR_HAS(needle);
}

static void test_size_rejections(void)
{
	expect_size_error("", -EINVAL, "empty size");
	expect_size_error(NULL, -EINVAL, "empty size");
	expect_size_error("-5", -EINVAL, "'-5' is negative");
	expect_size_error("-1G", -EINVAL, "negative");
	expect_size_error("12Q", -EINVAL, "'12Q' is not a number");
	expect_size_error("12MiBs", -EINVAL, "'12MiBs'");
	expect_size_error("12Mi", -EINVAL, "'12Mi'");
	expect_size_error("G", -EINVAL, "'G'");
	expect_size_error("   ", -EINVAL, "empty size");
	expect_size_error(" -4G", -EINVAL, "negative");
	expect_size_error("4 4G", -EINVAL, "'4 4G'");
	expect_size_error("4G B", -EINVAL, "'4G B'");
	expect_size_error("4 G iB", -EINVAL, "'4 G iB'");
	expect_size_error("+4G", -EINVAL, "'+4G'");
	expect_size_error(".5G", -EINVAL, "'.5G'");
	expect_size_error("1.G", -EINVAL, "'1.G'");
	expect_size_error("1.2.3", -EINVAL, "'1.2.3'");
	expect_size_error("0x10", -EINVAL, "'0x10'");
	expect_size_error("1.5", -EINVAL, "'1.5' is not a whole number of bytes");
	expect_size_error("0.3K", -EINVAL, "'0.3K' is not a whole number");
	expect_size_error("1.0000000000000000001G", -EINVAL, "'1.0000000000000000001G'");
	expect_size_error("18446744073709551616", -EOVERFLOW, "larger than 2^64 - 1");
	expect_size_error("16E", -EOVERFLOW, "'16E'");
	expect_size_error("16777216T", -EOVERFLOW, "'16777216T'");
	expect_size_error("15.9999999999E", -EINVAL, "whole number");
	expect_size_error("99999999999999999999999K", -EOVERFLOW, "larger than");
}

int main(void)
{
	test_names_round_trip();
	test_pages_forms();
	test_other_names();
	test_numa();
	test_size_forms();
	test_size_rejections();
	return 0;
}
