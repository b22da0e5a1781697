# SPDX-License-Identifier: Apache-2.0
"""The collective protocol: create_shared_segment runs the C library's two
phases with the group's all-gather between them, in three rounds (setup
statuses, blobs, complete statuses), so that every rank ends with the same
segment or the same error."""
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from . import _backends, _frameworks, _links, _log, _native, _options
from ._errors import Status, failure
from ._native import SharedSegmentError
from ._options import whole
from ._plan import BlockSpec, Plan
from .segment import SharedSegment


def create_shared_segment(
        name: str,
        blocks: Optional[Mapping[str, BlockSpec]] = None,
        world_size: Optional[int] = None,
        rank_id: Optional[int] = None,
        owner_rank: Optional[int] = None,
        device_id: Optional[int] = None,
        comm_group: Any = None,
        mmap: bool = True,
        host_register: bool = False,
        *,
        tp_group: Any = None,
        exchange: Optional[Callable[[bytes], List[bytes]]] = None,
        size: Union[int, str, None] = None,
        pages: Optional[str] = None,
        hugetlb: bool = False,
        numa: Union[str, int, None] = None,
        populate: Optional[str] = None,
        populate_threads: int = 0,
        layout: Optional[str] = None,
        align: Optional[int] = None,
        readonly_peers: bool = False,
        backend: Optional[str] = None,
        timeout: Any = None,
        keeper: Optional[str] = None) -> "SharedSegment":
    """Creates one segment shared by every rank of a group; every rank calls
    it with the same declaration, and every rank gets a SharedSegment over
    the same bytes. Over a group's Store (a torch.distributed group that
    has one, a vLLM or SGLang coordinator, a StatelessProcessGroup) calls
    pair up by name: the n-th call for a name on each rank meets the n-th
    on every other, so calls for different names may run at once, from
    several threads, in any order. Over a collective (a group without a
    Store, an mpi4py communicator) calls pair up by their order: one
    process makes one at a time per group (another thread's call waits for
    it, up to its timeout), and every rank must make them in the same
    order. Calls that pair up wrongly fail with the declaration they differ
    in, on every rank. An exchange callable pairs as the caller makes it.

    The arguments up to host_register may be given by position, in the
    order of mooncake.shared_segment.create_shared_segment (name, blocks,
    world_size, rank_id, owner_rank, device_id, comm_group, mmap,
    host_register): a program written against Mooncake's runs unchanged.
    The others are keywords only.

    Args:
        name: the segment's name (1 to 63 bytes of UTF-8); it names the memfd
            ("sseg:NAME" in /proc/PID/maps) and enters the fingerprint.
        blocks: {block name: dict(count=, shape=, dtype=, align=None)} or
            {name: (count, shape, dtype)}: count entries of shape and dtype each.
            dtype is a torch or numpy dtype or a name ("bfloat16", "bf16",
            "float8_e4m3fn", "fp8", "f32", ...). The C library lays them out.
        world_size: ranks in the group; default: the group's size (1 without
            a group). Given and different from the group's: ValueError.
        rank_id: this process's rank in the group; default: the group's rank.
        tp_group: alias of comm_group.
        comm_group: the group: a torch.distributed ProcessGroup (registered
            or not, any backend), a c10d backend such as ProcessGroupGloo, a
            vLLM or SGLang GroupCoordinator (its cpu_group is used), a vLLM
            StatelessProcessGroup, an mpi4py communicator, or a callable like
            exchange. None: no group for world_size 1, else the default
            torch.distributed group when it has exactly world_size ranks.
        exchange: a callable exchange(my_bytes) -> [bytes of rank 0, 1, ...]
            instead of a group (needs world_size and rank_id).
        owner_rank: the rank that allocates its host's copy; default: each
            host's lowest rank.
        size: bytes (4096, "256MiB") for a segment without blocks, or more
            than the blocks need.
        pages: "auto", "base", "thp", "hugetlb" (2 MiB), "hugetlb-2M",
            "hugetlb-1G"; default: $SHAREDSEG_PAGES, else "auto".
        hugetlb: True asks for "hugetlb-2M" when pages is not given.
        numa: "none", a node number, "interleave", "device-local"; default:
            $SHAREDSEG_NUMA, else "none".
        populate: "owner" (the owner faults every page in create), "spread"
            (each rank faults its slice in complete), "lazy", "background"
            (complete returns once every rank has mapped; the owner's
            threads then fault every page in while the segment is in use:
            see wait_populated()); default: $SHAREDSEG_POPULATE, else
            "owner".
        populate_threads: the owner's population threads (0: up to 4).
        layout: "interleaved" (index 0 of every block, then index 1, ...) or
            "grouped"; only with blocks.
        align: every entry's alignment (a power of two; default 4096); only
            with blocks.
        readonly_peers: peers map the segment read-only; only the owner writes.
        backend: "auto", "memfd", "cuda" (CUDA VMM host memory), "ascend".
        mmap: False selects a device backend's VMM host memory: cuda, or ascend
            where an Ascend runtime is present and CUDA is not.
        host_register: pin each rank's mapping for device DMA (cuMemHostRegister, or
            aclrtHostRegister where only the ACL runtime is usable).
        device_id: the GPU for the CUDA paths; default: torch's current CUDA
            device when torch already initialised CUDA, else 0. CUDA is never
            initialised for a memfd segment without host_register.
        timeout: how long a rank waits for the others at each step (seconds,
            or a datetime.timedelta); None or 0: 30 s. The declared
            population's expected time is added to it (2 s per GiB on base
            or auto pages, 1 s per GiB on huge pages; none for "lazy"), so
            the owner's first touch does not count against its peers.
        keeper: a keeper's name (`sharedseg keep --name NAME`, run by this
            user on this host): the owner maps the segment that keeper holds
            for this very declaration, with what the last group wrote in it
            (info()["kept"] is True), else allocates anew and leaves the new
            one with the keeper. memfd backend only. See docs/c-api.md,
            "Keepers".

    Returns:
        This rank's SharedSegment.

    Raises:
        ValueError, TypeError: at once, on this rank, for what decides how
            the ranks talk (an object that is no group, no group for
            world_size > 1, world_size/rank_id with a callable).
        SharedSegmentValueError, SharedSegmentTypeError (subclasses of
            SharedSegmentError and of ValueError/TypeError): on every rank
            alike, for an argument one rank got wrong or ranks disagree on.
        SharedSegmentError: on every rank alike for the rest; errno is set
            (errno.ETIMEDOUT when a rank did not arrive, naming it).
    """
    args = dict(layout=layout, align=align, size=size, pages=pages, hugetlb=hugetlb, numa=numa,
                populate=populate, populate_threads=populate_threads, backend=backend, mmap=mmap,
                readonly_peers=readonly_peers, host_register=host_register,
                device_id=device_id, timeout=timeout, owner_rank=owner_rank, keeper=keeper)
    link, mistake = _link(comm_group, tp_group, exchange, world_size)
    ranks, rank = _talk(link, world_size, rank_id)
    _log.sync_level()
    wait_s = _wait_seconds(timeout)
    try:
        _links.open_call(link, name if isinstance(name, str) else repr(name), wait_s)
        plan, statuses = _setup(link, mistake, (world_size, rank_id), name, blocks, args,
                                ranks, rank, wait_s)
        ids = [s.host_id for s in statuses]
        owner = _owner(plan.owner_rank, ids, ranks, rank, plan.backend_name)
        native, facts = _establish(plan, link, ranks, rank, owner)
        facts["sharing_ranks"] = [r for r in range(ranks) if r == rank or _owner(
            plan.owner_rank, ids, ranks, r, plan.backend_name) == owner]
    except BaseException as e:
        _links.abandon(link, rank, e)
        raise
    finally:
        link.end_call()
    return SharedSegment(native, plan, ranks, rank, facts)


def _link(comm_group: Any, tp_group: Any, exchange: Any,
          world_size: Any) -> Tuple[_links.Link, Optional[Exception]]:
    """The link to talk over, and a mistake for setup to report: naming two
    groups (comm_group is used all the same, so that the mistake reaches
    every rank), or the link's own."""
    mistake = None
    if comm_group is not None and tp_group is not None and comm_group is not tp_group:
        mistake = ValueError("comm_group= and tp_group= name different groups; "
                             "tp_group is an alias of comm_group: pass one of them")
    group = comm_group if comm_group is not None else tp_group
    link = _frameworks.resolve(group, exchange, world_size)
    return link, mistake or link.mistake


def _talk(link: _links.Link, world_size: Any, rank_id: Any) -> Tuple[int, int]:
    """The size and rank the exchange runs with: the group's own when it
    has them, else (a callable exchange) world_size and rank_id, checked
    here, on this rank, since the ranks cannot talk without them."""
    if link.size is not None:
        return link.size, link.rank
    if world_size is None:
        raise ValueError("an exchange callable needs world_size= (and rank_id=): it cannot "
                         "tell them")
    size = whole(world_size, "world_size", maximum=65536)
    if rank_id is None and size > 1:
        raise ValueError(f"world_size={size} with an exchange callable needs rank_id=")
    rank = whole(rank_id or 0, "rank_id", minimum=0)
    if rank >= size:
        raise ValueError(f"rank_id={rank} is outside 0..{size - 1}")
    return size, rank


def _wait_seconds(timeout: Any) -> float:
    """timeout= in seconds, or the default where it is a mistake (which
    setup then reports to every rank)."""
    try:
        return _options.timeout_seconds(timeout)[0]
    except (TypeError, ValueError):
        return _options.DEFAULT_TIMEOUT_S


def _setup(link: _links.Link, mistake: Optional[Exception], given: Tuple[Any, Any], name: Any,
           blocks: Any, args: Dict[str, Any], size: int, rank: int,
           wait_s: float) -> Tuple[Plan, List[Status]]:
    """The setup round: each rank's plan, or its mistake, and its host
    identity, all-gathered; every rank raises the same error if any failed."""
    plan, status = None, Status()
    try:
        _options.timeout_seconds(args["timeout"])  # a mistake in it: every rank's error
        if mistake is not None:
            raise mistake
        _check_ranks(given, link, size, rank)
        plan = _plan(name, blocks, args, size)
        status.host_id = _native.host_identity()
    except Exception as e:
        status = Status.failed("setup", e)
    statuses = _agree(link, "setup", status, wait_s, size)
    _raise_if_failed(link, link.name, statuses)
    return plan, statuses


def _check_ranks(given: Tuple[Any, Any], link: _links.Link, size: int, rank: int) -> None:
    """world_size and rank_id, when given, must be the group's."""
    world_size, rank_id = given
    if world_size is not None:
        n = whole(world_size, "world_size")
        if n != size:
            raise ValueError(f"world_size={n}, but {link.what} has {size} ranks")
    if rank_id is not None:
        n = whole(rank_id, "rank_id", minimum=0)
        if n != rank:
            raise ValueError(f"rank_id={n}, but this process is rank {rank} of {link.what}")


def _plan(name: Any, blocks: Any, args: Dict[str, Any], size: int) -> Plan:
    """mmap=False is a device backend's VMM host memory (_backends decides
    which); the rest is the plan's."""
    a = dict(args)
    if not a.pop("mmap"):
        a["backend"] = _backends.vmm_backend(a["backend"])
    return Plan(name, blocks, a, size)


def _owner(owner_rank: Optional[int], ids: List[bytes], world_size: int, rank: int,
           backend: str) -> int:
    """Each host's lowest rank, unless owner_rank is on this rank's host.
    With a device backend owner_rank serves every rank: a fabric handle
    crosses hosts (the C library refuses the group, naming the hosts, when
    only in-host handles could be made)."""
    if owner_rank is not None and (ids[owner_rank] == ids[rank] or
                                   _backends.is_device_backend(backend)):
        return owner_rank
    return _native.host_owner(b"".join(ids), world_size, rank)


def _agree(link: _links.Link, label: str, status: Status, wait_s: float,
           size: int) -> List[Status]:
    got = _links.gather(link, label, status.encode(), wait_s, size)
    return [Status.decode(r, raw) for r, raw in enumerate(got)]


def _raise_if_failed(link: _links.Link, name: str, statuses: List[Status]) -> None:
    """Every rank raises the same error here, having read every round."""
    err = failure(name, statuses)
    if err is not None:
        err.agreed = True
        link.close_call()
        raise err


def _establish(plan: Plan, link: _links.Link, size: int, rank: int,
               owner: int) -> Tuple[Any, Dict[str, Any]]:
    """Phase 1, the blobs round, phase 2 and the complete round: the
    completed native segment and its sseg_info, read once (on THP pages it
    reads /proc/self/smaps)."""
    native, blob, err, message = _native.create(plan.name, size, rank, owner,
                                                **plan.create_args)
    status = Status() if native else Status(False, "create", err, message)
    try:
        blobs = _links.gather(link, "blobs", blob, plan.wait_s, size)
        if native is not None:
            try:
                native.complete(b"".join(blobs), link.watch())
            except SharedSegmentError as e:
                status = Status.failed("complete", e)
        _raise_if_failed(link, plan.name, _agree(link, "complete", status, plan.wait_s, size))
        link.close_call()
    except BaseException:
        if native is not None:
            native.close()
        raise
    facts = native.info()
    if plan.host_register or facts.get("pinned"):
        native.set_quiesce(_backends.quiesce(plan.device))
    return native, facts
