/* SPDX-License-Identifier: Apache-2.0 */
/* Every rank of a group maps one segment: run `share RANK WORLD` once per
 * rank on one host (the README builds and runs it; tests/readme/c_example.sh
 * does the same). The all-gather here is the library's local exchange; an
 * engine passes its own group's (MPI_Allgather, torch.distributed, ...). */
#include <sharedseg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The two phases: create, all-gather the blobs, complete. */
static int share(int rank, int world, sseg_allgather_fn allgather, void *ctx, sseg_t **out)
{
	SSEG_OPTS(o, .name = "kv-cache", .size = 64 << 20, .world_size = world, .rank = rank,
		  .owner_rank = 0, .pages = SSEG_PAGES_AUTO, .populate = SSEG_POPULATE_OWNER);
	unsigned char blob[SSEG_BLOB_SIZE], *blobs = malloc((size_t)SSEG_BLOB_SIZE * world);
	sseg_t *seg = NULL;
	int rc;

	if (!blobs)
		return -1;
	rc = sseg_create(&o, &seg, blob);            /* on failure blob says why */
	if (allgather(blob, blobs, SSEG_BLOB_SIZE, ctx)) /* every rank, always */
		rc = rc ? rc : -1;
	if (!rc)
		rc = sseg_complete(seg, blobs);
	free(blobs);
	if (rc) {
		fprintf(stderr, "sharedseg: %s\n", sseg_last_error());
		sseg_destroy(seg);
		return rc;
	}
	*out = seg; /* sseg_base(seg): this rank's address of the one copy */
	return 0;
}

int main(int argc, char **argv)
{
	struct sseg_local_group *group;
	int rank = argc > 2 ? atoi(argv[1]) : 0, world = argc > 2 ? atoi(argv[2]) : 1;
	char *base, done = 1, all[64];
	sseg_t *seg;

	if (world < 1 || world > 64 || rank < 0 || rank >= world) {
		fprintf(stderr, "usage: share RANK WORLD (0 <= RANK < WORLD <= 64)\n");
		return 2;
	}
	if (sseg_local_group_open("share-example", rank, world, 30000, &group)) {
		fprintf(stderr, "share: %s\n", sseg_last_error());
		return 1;
	}
	if (share(rank, world, sseg_local_allgather, group, &seg))
		return 1;
	base = sseg_base(seg);
	if (rank == 0)
		strcpy(base, "written once by rank 0");
	sseg_local_allgather(&done, all, 1, group); /* rank 0 has written */
	printf("rank %d of %d reads: %s\n", rank, world, base);
	sseg_local_allgather(&done, all, 1, group); /* everyone has read */
	sseg_destroy(seg);
	sseg_local_group_close(group);
	return 0;
}
