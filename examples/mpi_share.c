/* SPDX-License-Identifier: Apache-2.0 */
/* mpi_share: every rank of an MPI job maps one host-memory segment, with
 * MPI_Allgather as the exchange between sharedseg's two phases.
 *
 *   mpicc -std=gnu11 -Iinclude examples/mpi_share.c build/libsharedseg.a -lpthread -ldl
 *   mpirun -n 3 ./a.out
 *
 * Each host's lowest rank owns that host's copy; every rank writes its own
 * slice and reads every other rank's. */
#include <inttypes.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sharedseg.h"

#define SLICE_FLOATS (1u << 20) /* 4 MiB per rank */

/* One failure anywhere fails every rank, with the failing rank's sentence. */
static int agree(int rc, const char *phase, MPI_Comm comm)
{
	int rank, worst = rc, first = -1, world;
	char mine[256], *all;

	MPI_Comm_rank(comm, &rank);
	MPI_Comm_size(comm, &world);
	MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MIN, comm);
	if (!worst)
		return 0;
	snprintf(mine, sizeof(mine), "%s", rc ? sseg_last_error() : "");
	all = malloc((size_t)world * sizeof(mine));
	MPI_Allgather(mine, sizeof(mine), MPI_CHAR, all, sizeof(mine), MPI_CHAR, comm);
	for (int r = 0; r < world && first < 0; r++)
		if (all[(size_t)r * sizeof(mine)])
			first = r;
	if (rank == 0)
		fprintf(stderr, "%s failed; rank %d: %s\n", phase, first,
			all + (size_t)first * sizeof(mine));
	free(all);
	return worst;
}

/* Groups spanning hosts: one owner per host, picked the same way by all. */
static int pick_owner(int rank, int world, MPI_Comm comm)
{
	uint8_t id[SSEG_HOST_ID_SIZE], *ids = malloc((size_t)world * SSEG_HOST_ID_SIZE);
	int owner;

	if (sseg_host_identity(id))
		memset(id, 0xff, sizeof(id)); /* a unique id: this rank then owns alone */
	MPI_Allgather(id, SSEG_HOST_ID_SIZE, MPI_BYTE, ids, SSEG_HOST_ID_SIZE, MPI_BYTE, comm);
	owner = sseg_host_owner(ids, world, rank);
	free(ids);
	return owner;
}

/* The two phases with MPI_Allgather between them. */
static int share(int rank, int world, MPI_Comm comm, sseg_t **seg)
{
	uint8_t blob[SSEG_BLOB_SIZE], *blobs = malloc((size_t)world * SSEG_BLOB_SIZE);
	SSEG_OPTS(opts, .name = "mpi_share", .size = (uint64_t)world * SLICE_FLOATS * sizeof(float),
		  .world_size = world, .rank = rank, .owner_rank = pick_owner(rank, world, comm),
		  .timeout_ms = 30000);
	int rc;

	/* A failed create still fills blob: the others then fail naming us. */
	rc = sseg_create(&opts, seg, blob);
	MPI_Allgather(blob, SSEG_BLOB_SIZE, MPI_BYTE, blobs, SSEG_BLOB_SIZE, MPI_BYTE, comm);
	if (!rc)
		rc = sseg_complete(*seg, blobs);
	free(blobs);
	rc = agree(rc, "sharing the segment", comm);
	if (rc) {
		sseg_destroy(*seg);
		*seg = NULL;
	}
	return rc;
}

static int check_slices(const float *all, int world, int rank)
{
	for (int r = 0; r < world; r++)
		for (size_t i = 0; i < SLICE_FLOATS; i += 4099)
			if (all[(size_t)r * SLICE_FLOATS + i] != (float)(r + 1)) {
				fprintf(stderr, "rank %d: rank %d's slice holds %g at %zu\n", rank, r,
					all[(size_t)r * SLICE_FLOATS + i], i);
				return -1;
			}
	return 0;
}

int main(int argc, char **argv)
{
	struct sseg_info info = { .sz = sizeof(info) };
	sseg_t *seg = NULL;
	int rank, world, rc;
	float *all;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	if (share(rank, world, MPI_COMM_WORLD, &seg)) {
		MPI_Finalize();
		return 1;
	}
	all = sseg_base(seg);
	for (size_t i = 0; i < SLICE_FLOATS; i++)
		all[(size_t)rank * SLICE_FLOATS + i] = (float)(rank + 1);
	MPI_Barrier(MPI_COMM_WORLD);
	rc = agree(check_slices(all, world, rank), "reading every rank's slice", MPI_COMM_WORLD);
	sseg_info(seg, &info);
	printf("rank %d: %s, owner rank %d, %s pages, base %p\n", rank,
	       info.is_owner ? "owner" : "peer", info.owner_rank, sseg_pages_name(info.pages),
	       info.base);
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD); /* nobody unmaps while another still reads */
	if (!rc && rank == 0)
		printf("%d ranks shared one %" PRIu64 "-byte segment: every rank read every "
		       "rank's slice\n", world, sseg_size(seg));
	sseg_destroy(seg);
	MPI_Finalize();
	return rc ? 1 : 0;
}
