"""All-gathers of fixed-size bytes over the caller's process group: a
torch.distributed group, an mpi4py communicator or any callable. The C
library never calls back into Python; these run between its two phases."""
import datetime
import sys


class _Callable:
    def __init__(self, fn):
        self.fn = fn
        self.what = f"the exchange callable {getattr(fn, '__name__', fn)!r}"

    def check(self, world_size, rank):
        return None

    def __call__(self, mine):
        return list(self.fn(bytes(mine)))


class _Mpi:
    def __init__(self, comm):
        self.comm = comm
        self.what = "the MPI communicator"

    def check(self, world_size, rank):
        size, mine = self.comm.Get_size(), self.comm.Get_rank()
        if (size, mine) != (world_size, rank):
            return (f"world_size={world_size}, rank_id={rank}, but the MPI communicator has "
                    f"{size} ranks and this process is rank {mine}")
        return None

    def __call__(self, mine):
        return self.comm.allgather(bytes(mine))


class _Torch:
    """gloo (and mpi): CPU tensors; nccl: CUDA tensors on the current device."""

    def __init__(self, group, timeout):
        import torch.distributed as dist
        self.dist = dist
        self.group = group
        self.timeout = timeout
        self.what = "the torch.distributed group"

    def check(self, world_size, rank):
        size = self.dist.get_world_size(self.group)
        mine = self.dist.get_rank(self.group)
        if (size, mine) != (world_size, rank):
            return (f"world_size={world_size}, rank_id={rank}, but the torch.distributed group "
                    f"has {size} ranks and this process is rank {mine} in it")
        return None

    def __call__(self, mine):
        import torch
        n = self.dist.get_world_size(self.group)
        sent = torch.frombuffer(bytearray(mine), dtype=torch.uint8)
        if str(self.dist.get_backend(self.group)).lower() == "nccl":
            sent = sent.to(torch.device("cuda", torch.cuda.current_device()))
        got = [torch.empty_like(sent) for _ in range(n)]
        work = self.dist.all_gather(got, sent, group=self.group, async_op=True)
        _wait(work, self.timeout)
        return [bytes(t.cpu().tolist()) for t in got]


def _wait(work, timeout):
    if timeout is None:
        work.wait()
        return
    try:
        done = work.wait(timeout=datetime.timedelta(seconds=timeout))
    except TypeError:  # a torch whose Work.wait takes no timeout
        done = work.wait()
    if done is False:
        raise TimeoutError(f"the all-gather did not finish within {timeout} s")


def _is_torch_group(obj):
    if "torch" not in sys.modules:
        return False
    import torch.distributed as dist
    return dist.is_available() and isinstance(obj, dist.ProcessGroup)


def _default_torch_group(world_size):
    if "torch" in sys.modules:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.group.WORLD
    raise ValueError(
        f"world_size={world_size} needs an exchange: pass comm_group= (a torch.distributed "
        f"group or an mpi4py communicator), or exchange= (a callable), or initialise "
        f"torch.distributed so its default group can be used")


def resolve(group, exchange, world_size, timeout):
    """The all-gather to use, or None when world_size is 1 and none is given."""
    if exchange is not None:
        if group is not None:
            raise ValueError("pass either comm_group=/tp_group= or exchange=, not both")
        if not callable(exchange):
            raise TypeError(f"exchange must be callable, not {type(exchange).__name__}")
        return _Callable(exchange)
    if group is None:
        return None if world_size == 1 else _Torch(_default_torch_group(world_size), timeout)
    # A vLLM GroupCoordinator carries its gloo group as cpu_group.
    cpu_group = getattr(group, "cpu_group", None)
    if cpu_group is not None and _is_torch_group(cpu_group):
        group = cpu_group
    if _is_torch_group(group):
        return _Torch(group, timeout)
    if type(group).__module__.startswith("mpi4py") or (
            hasattr(group, "allgather") and hasattr(group, "Get_rank")):
        return _Mpi(group)
    if callable(group):
        return _Callable(group)
    raise TypeError(f"comm_group must be a torch.distributed group, an mpi4py communicator "
                    f"or a callable, not {type(group).__name__}")
