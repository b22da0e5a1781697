# SPDX-License-Identifier: Apache-2.0
"""One rank of the mpi4py test (run under mpirun): share, write, read, and
a mismatch that every rank must report naming rank 1."""
from mpi4py import MPI

from sharedseg import SharedSegmentError, create_shared_segment

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()

seg = create_shared_segment("py-mpi", {"x": dict(count=world, shape=(1024,), dtype="float32")},
                            world_size=world, rank_id=rank, comm_group=comm, pages="base")
xs = seg.arrays("x")
xs[rank][:] = rank + 1
comm.Barrier()
shared = all(comm.allgather(all(bool((xs[r] == r + 1).all()) for r in range(world))))
comm.Barrier()
del xs
seg.close()

try:
    create_shared_segment("py-mpi-bad", {"x": (world + (rank == 1), (16,), "float32")},
                          world_size=world, rank_id=rank, comm_group=comm, pages="base")
    named = False
except SharedSegmentError as e:
    named = "rank 1 declared" in str(e)
print(f"rank {rank}: shared={shared} owner={seg.owner_rank} mismatch_named={named}", flush=True)
