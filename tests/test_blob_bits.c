/* SPDX-License-Identifier: Apache-2.0 */
/* Single-bit corruption of the blobs a 4-rank group exchanges, as another
 * rank verifies them in sseg_complete:
 *   - as corrupted (checksum not fixed): every flip, anywhere, is refused
 *     naming the blob's index;
 *   - with the checksum made to match (a wrong value sent on purpose, or a
 *     corruption before the checksum was computed): every flip in a field
 *     that decides what is mapped, by whom and how (the header, the rank,
 *     world and owner, the declaration, the host identity, the name, the
 *     owner's page and size facts) is refused naming the rank. Flips
 *     elsewhere are counted by what they touch: fields used only later
 *     (the owner's pid, socket name and token: sseg_complete then fails to
 *     reach the owner) and bytes that carry nothing (nonce, padding, a
 *     peer's empty handle section, the layout text behind its hash).
 * make test flips every bit of the decisive fields and every 16th bit
 * elsewhere of the owner's and one peer's blob; SSEG_BLOB_BITS_ALL=1 flips
 * every bit of every rank's blob (make reliability). */
#include <stdio.h>
#include <string.h>

#include "blob.h"
#include "hostcheck.h"
#include "segment_types.h"
#include "testutil.h"
#include "verify.h"

#define WORLD 4
#define OFF_CHECKSUM (SSEG_BLOB_SIZE - 4)

struct field {
	unsigned begin, end; /* bytes [begin, end) */
	const char *name;
	int decisive;        /* 1: a flip must be refused; 2: only in the owner's blob */
};

/* The blob's fields (src/blob.c). Bytes behind a NUL of the name, the
 * layout text and padding carry nothing. */
static const struct field fields[] = {
	{ 0, 8, "magic, version, size", 1 },   { 8, 12, "status", 1 },
	{ 12, 16, "rank", 1 },                 { 16, 24, "fingerprint", 1 },
	{ 24, 40, "boot id", 1 },              { 40, 48, "network namespace", 1 },
	{ 48, 56, "pid namespace", 0 },        { 56, 60, "uid", 1 },
	{ 60, 64, "pid", 0 },
	/* the declaration (decl.h): its GROUP rows, and the owner rank */
	{ 64, 128, "name", 1 },                { 128, 136, "layout hash", 1 },
	{ 136, 144, "size", 1 },               { 144, 152, "pages", 1 },
	{ 152, 160, "backend", 1 },            { 160, 168, "flags", 1 },
	{ 168, 176, "populate", 1 },           { 176, 184, "world size", 1 },
	{ 184, 192, "owner rank", 1 },         { 192, 208, "numa, numa node", 0 },
	{ 208, 256, "padding", 0 },
	{ 256, 264, "handle kind, pages", 2 }, { 264, 280, "page size, mapped size", 2 },
	{ 280, 328, "socket name", 0 },        { 328, 344, "token", 0 },
	{ 344, 472, "backend handle data", 0 }, { 472, 1024, "error text", 0 },
	{ 1024, 1026, "layout length", 0 },    { 1026, 4088, "layout text", 0 },
	{ 4088, 4092, "nonce", 0 },            { 4092, 4096, "checksum", 1 },
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

struct tally {
	int flips, refused, named;
	int accepted[NFIELDS];
	int decisive_accepted;
};

static struct tu_rank ranks[WORLD];
static unsigned char *valid;
static unsigned name_len;

static int field_of(unsigned byte)
{
	for (unsigned f = 0; f < NFIELDS; f++)
		if (byte >= fields[f].begin && byte < fields[f].end)
			return (int)f;
	return -1;
}

/* A flip there must be refused: the name up to its NUL only. */
static int decisive(int r, unsigned byte)
{
	const struct field *f = &fields[field_of(byte)];

	if (f->begin == 64) /* the name */
		return byte - 64 <= name_len;
	return f->decisive == 1 || (f->decisive == 2 && r == 0);
}

static void fix_checksum(uint8_t *blob)
{
	uint64_t h = sseg_hash64(blob, OFF_CHECKSUM, 0x5353);

	sseg_put32(blob + OFF_CHECKSUM, (uint32_t)(h ^ (h >> 32)));
}

static int names(const char *text, int r)
{
	char index[32], both[32];

	snprintf(index, sizeof(index), "index %d", r);
	snprintf(both, sizeof(both), "and %d both", r);
	return hc_names_rank(text, r) || strstr(text, index) || strstr(text, both);
}

static void flip(int r, unsigned bit, int fixed, struct tally *t)
{
	static uint8_t raw[WORLD * SSEG_BLOB_SIZE];
	struct sseg_blob blobs[WORLD];
	uint8_t *blob = raw + (size_t)r * SSEG_BLOB_SIZE;
	int verifier = (r + 1) % WORLD, rc;

	memcpy(raw, valid, sizeof(raw));
	blob[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	if (fixed && bit / 8 < OFF_CHECKSUM)
		fix_checksum(blob);
	rc = sseg_verify_blobs(ranks[verifier].seg, raw, blobs);
	t->flips++;
	if (rc) {
		t->refused++;
		t->named += names(sseg_last_error(), r);
		return;
	}
	t->accepted[field_of(bit / 8)]++;
	if (decisive(r, bit / 8)) {
		t->decisive_accepted++;
		fprintf(stderr, "rank %d's blob, bit %u (%s): accepted\n", r, bit,
			fields[field_of(bit / 8)].name);
	}
}

static void make_group(void)
{
	static const struct sseg_block_desc blocks[] = {
		{ .name = "k", .count = 3, .bytes = 1024, .shape = "bfloat16[512]" },
		{ .name = "v", .count = 2, .bytes = 100, .shape = "float16[50]" },
	};
	struct sseg_layout *layout;

	CHECK_RC(sseg_layout_create(blocks, 2, SSEG_LAYOUT_INTERLEAVED, 0, &layout), 0);
	for (int r = 0; r < WORLD; r++)
		ranks[r].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "bits",
						    .world_size = WORLD, .rank = r,
						    .pages = SSEG_PAGES_BASE,
						    .populate = SSEG_POPULATE_LAZY, .layout = layout };
	valid = tu_create_inproc(ranks, WORLD);
	for (int r = 0; r < WORLD; r++)
		CHECK(ranks[r].create_rc == 0);
	name_len = (unsigned)strlen("bits");
	sseg_layout_destroy(layout);
}

static void report(const char *variant, const struct tally *t)
{
	char accepted[1024] = "";
	size_t used = 0;

	for (unsigned f = 0; f < NFIELDS; f++)
		if (t->accepted[f] && used < sizeof(accepted))
			used += (size_t)snprintf(accepted + used, sizeof(accepted) - used,
						 "%s\"%s\":%d", used ? "," : "", fields[f].name,
						 t->accepted[f]);
	printf("blob_bits (%s): %d flips, %d refused (%d naming the rank), %d decisive "
	       "accepted\n", variant, t->flips, t->refused, t->named, t->decisive_accepted);
	hc_record("{\"test\":\"blob_bits\",\"variant\":\"%s\",\"flips\":%d,\"refused\":%d,"
		  "\"named\":%d,\"decisive_accepted\":%d,\"accepted\":{%s}}",
		  variant, t->flips, t->refused, t->named, t->decisive_accepted, accepted);
}

int main(void)
{
	static const int some[] = { 0, 2 }, all[] = { 0, 1, 2, 3 };
	int every = hc_scale("SSEG_BLOB_BITS_ALL", 0);
	const int *which = every ? all : some;
	int n = every ? 4 : 2;
	struct tally raw = { 0 }, fixed = { 0 };

	sseg_set_log_level(SSEG_LOG_OFF);
	make_group();
	for (int i = 0; i < n; i++) {
		for (unsigned bit = 0; bit < SSEG_BLOB_SIZE * 8; bit++) {
			if (!every && !decisive(which[i], bit / 8) && bit % 16)
				continue;
			flip(which[i], bit, 0, &raw);
			flip(which[i], bit, 1, &fixed);
		}
	}
	report("as corrupted", &raw);
	report("checksum made to match", &fixed);
	tu_destroy_all(ranks, WORLD);
	free(valid);
	if (raw.refused != raw.flips || raw.named != raw.flips) {
		fprintf(stderr, "blob_bits: a corrupted blob was accepted, or refused without "
			"naming its index\n");
		return 1;
	}
	if (fixed.decisive_accepted || fixed.named != fixed.refused) {
		fprintf(stderr, "blob_bits: verification accepted a changed decisive field, or "
			"refused one without naming the rank\n");
		return 1;
	}
	return 0;
}
