/* SPDX-License-Identifier: Apache-2.0 */
/* The blob: round trip of every field, every corruption caught with its own
 * message, and a fingerprint that follows the declaration and nothing else. */
#include <string.h>

#include "blob.h"
#include "testutil.h"

static struct sseg_blob sample(void)
{
	struct sseg_blob b;

	memset(&b, 0, sizeof(b));
	b.rank = 3;
	b.decl.world_size = 8;
	b.decl.owner_rank = 0;
	b.decl.size = 0x123456789ull;
	b.decl.pages = SSEG_PAGES_THP;
	b.decl.backend = SSEG_BACKEND_MEMFD;
	b.decl.flags = SSEG_F_READONLY_PEERS;
	b.decl.populate = SSEG_POPULATE_SPREAD;
	b.decl.layout = 0x1122334455667788ull;
	b.decl.numa = SSEG_NUMA_NODE;
	b.decl.numa_node = 1;
	snprintf(b.decl.name, sizeof(b.decl.name), "kv-cache");
	for (int i = 0; i < 16; i++)
		b.host.boot_id[i] = (uint8_t)(i * 17);
	b.host.netns = 4026531840ull;
	b.host.pidns = 4026531836ull;
	b.host.uid = 1000;
	b.pid = 4242;
	b.nonce = 0xa5a5f00d;
	b.handle.kind = SSEG_HANDLE_FD_CHANNEL;
	b.handle.pages = SSEG_PAGES_THP;
	b.handle.page_size = 2 << 20;
	b.handle.mapped_size = 0x123600000ull;
	snprintf(b.handle.sock, sizeof(b.handle.sock), "sharedseg-fd-1-abcdef");
	for (int i = 0; i < SSEG_TOKEN_LEN; i++)
		b.handle.token[i] = (uint8_t)(0xf0 + i);
	for (int i = 0; i < SSEG_HANDLE_DATA_LEN; i++)
		b.handle.data[i] = (uint8_t)i;
	b.fingerprint = sseg_blob_fingerprint(&b);
	return b;
}

static void round_trip(void)
{
	struct sseg_blob in = sample(), out;
	unsigned char raw[SSEG_BLOB_SIZE];

	sseg_blob_encode(&in, raw);
	CHECK_RC(sseg_blob_decode(raw, 3, &out), 0);
	CHECK(out.layout_len == 0);
	out.layout = NULL; /* points into raw */
	CHECK(!memcmp(&in, &out, sizeof(in)));
	/* The layout description travels whole up to SSEG_BLOB_LAYOUT_MAX. */
	in.layout = "v1;order=grouped;align=4096;size=8192;k:count=2,bytes=4096";
	sseg_blob_encode(&in, raw);
	CHECK_RC(sseg_blob_decode(raw, 3, &out), 0);
	CHECK(out.layout_len == strlen(in.layout) && !memcmp(out.layout, in.layout, out.layout_len));
	/* Explicit little-endian: the magic's bytes are "SSEG" on any host. */
	CHECK(!memcmp(raw, "SSEG", 4));
	CHECK(raw[12] == 3 && raw[13] == 0);
}

static void corrupt_and_check(int offset, unsigned char value, int expect, const char *needle)
{
	struct sseg_blob in = sample(), out;
	unsigned char raw[SSEG_BLOB_SIZE];

	sseg_blob_encode(&in, raw);
	raw[offset] = value;
	CHECK_RC(sseg_blob_decode(raw, 5, &out), expect);
	CHECK_ERR_HAS(needle);
	CHECK_ERR_HAS("index 5");
}

static void corruptions(void)
{
	corrupt_and_check(0, 'X', -EBADMSG, "not a sharedseg blob");
	corrupt_and_check(4, 9, -EPROTO, "format version 9");
	corrupt_and_check(7, 5, -EBADMSG, "declares 1280 bytes");
	corrupt_and_check(200, 0x5a, -EBADMSG, "checksum");
	corrupt_and_check(70, 0x5a, -EBADMSG, "checksum"); /* the declaration */
	corrupt_and_check(SSEG_BLOB_SIZE - 1, 0x00, -EBADMSG, "checksum");
	/* A blob cut short: zeroes where its tail should be. */
	{
		struct sseg_blob in = sample(), out;
		unsigned char raw[SSEG_BLOB_SIZE];

		sseg_blob_encode(&in, raw);
		memset(raw + 300, 0, SSEG_BLOB_SIZE - 300);
		CHECK_RC(sseg_blob_decode(raw, 1, &out), -EBADMSG);
		CHECK_ERR_HAS("checksum");
	}
}

static void fingerprint_follows_declaration(void)
{
	struct sseg_blob base = sample(), b;
	uint64_t fp = sseg_blob_fingerprint(&base);

#define DIFFERS(field, value)                                 \
	do {                                                  \
		b = base;                                     \
		b.field = value;                              \
		CHECK(sseg_blob_fingerprint(&b) != fp);       \
	} while (0)
#define SAME(field, value)                                    \
	do {                                                  \
		b = base;                                     \
		b.field = value;                              \
		CHECK(sseg_blob_fingerprint(&b) == fp);       \
	} while (0)
	/* decl.h's GROUP rows, and nothing else */
	DIFFERS(decl.size, base.decl.size + 1);
	DIFFERS(decl.world_size, 4);
	DIFFERS(decl.pages, SSEG_PAGES_HUGETLB_2M);
	DIFFERS(decl.backend, SSEG_BACKEND_CUDA);
	DIFFERS(decl.flags, 0);
	DIFFERS(decl.populate, SSEG_POPULATE_LAZY);
	DIFFERS(decl.layout, base.decl.layout ^ 1);
	DIFFERS(decl.name[0], 'K');
	SAME(rank, 5);
	SAME(decl.owner_rank, 4);
	SAME(decl.numa, SSEG_NUMA_INTERLEAVE);
	SAME(decl.numa_node, 0);
	SAME(pid, 1);
	SAME(nonce, 7);
	SAME(host.uid, 0);
#undef DIFFERS
#undef SAME
}

static void failure_blob(void)
{
	SSEG_OPTS(o, .name = "grp", .size = 4096, .world_size = 4, .rank = 2);
	unsigned char raw[SSEG_BLOB_SIZE];
	struct sseg_blob out;

	sseg_blob_failure(raw, &o, -ENOMEM, "the pool is empty");
	CHECK_RC(sseg_blob_decode(raw, 2, &out), 0);
	CHECK(out.status == -ENOMEM);
	CHECK(out.rank == 2 && out.decl.world_size == 4);
	CHECK(!strcmp(out.error, "the pool is empty"));
}

int main(void)
{
	round_trip();
	corruptions();
	fingerprint_follows_declaration();
	failure_blob();
	printf("blob: ok\n");
	return 0;
}
