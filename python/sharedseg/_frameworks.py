# SPDX-License-Identifier: Apache-2.0
"""Which link a call's group gets: a torch.distributed group (its Store, or
its own all-gather), a vLLM or SGLang coordinator, vLLM's
StatelessProcessGroup, an mpi4py communicator, a callable, or none for one
rank. Recognised by what the objects carry, never by importing an engine."""
import sys
from typing import Any, Optional

from ._links import Alone, CallableLink, CollectiveLink, Link, MpiLink
from ._store_link import StoreLink


def _torch_dist() -> Any:
    """torch.distributed when the process already imported torch."""
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist
    return dist if dist.is_available() else None


def _registry(dist: Any, table: str) -> Any:
    """torch.distributed's table of registered groups (torch 2.x: _world.X,
    1.x: _X)."""
    c10d = dist.distributed_c10d
    found = getattr(getattr(c10d, "_world", None), table, None)
    return found if found is not None else getattr(c10d, "_" + table, {})


def _group_name(dist: Any, group: Any) -> str:
    """The name torch gave a group, the same on every rank of it."""
    return str(_registry(dist, "pg_names").get(group) or getattr(group, "group_name", "") or "")


def _registered_store(dist: Any, group: Any) -> Any:
    entry = _registry(dist, "pg_map").get(group)
    if entry is not None and entry[1] is not None:
        return entry[1]
    getter = getattr(group, "get_group_store", None)
    if getter is not None:
        try:
            return getter()
        except RuntimeError:  # a group built without one
            return None
    return None


def _group_types(dist: Any) -> tuple:
    import torch
    backend = getattr(torch._C._distributed_c10d, "Backend", None)
    return (dist.ProcessGroup,) + ((backend,) if isinstance(backend, type) else ())


def _is_coordinator(obj: Any) -> bool:
    """vLLM's and SGLang's GroupCoordinator: cpu_group, rank_in_group, world_size."""
    return all(hasattr(obj, a) for a in ("cpu_group", "rank_in_group", "world_size"))


def _is_stateless(dist: Any, obj: Any) -> bool:
    """vLLM's StatelessProcessGroup: rank, world_size and a c10d store."""
    return (dist is not None and isinstance(getattr(obj, "store", None), dist.Store) and
            isinstance(getattr(obj, "rank", None), int) and
            isinstance(getattr(obj, "world_size", None), int))


def _torch_link(dist: Any, group: Any, what: str) -> Link:
    rank, size = group.rank(), group.size()
    store = _registered_store(dist, group)
    if store is not None:
        return StoreLink(store, rank, size, f"the store of {what}", _group_name(dist, group))
    return CollectiveLink(group, rank, size, what)


def link_for(group: Any) -> Link:
    """The link to a group the caller named; TypeError or ValueError, at
    once and on this rank only, for what cannot be a group. A coordinator
    that disagrees with its cpu_group still gives that group's link, with
    the mistake for setup to report."""
    dist = _torch_dist()
    if dist is not None and (group is dist.GroupMember.NON_GROUP_MEMBER or (
            isinstance(group, int) and not isinstance(group, bool) and group == -100)):
        raise ValueError("comm_group is torch's NON_GROUP_MEMBER: this process is not in "
                         "that group (new_group returns it to processes outside its ranks)")
    if _is_coordinator(group):
        link = link_for(group.cpu_group)
        if (link.size, link.rank) != (group.world_size, group.rank_in_group):
            link.mistake = ValueError(
                f"the coordinator says world_size={group.world_size}, "
                f"rank_in_group={group.rank_in_group}, but its cpu_group has {link.size} "
                f"ranks and this process is rank {link.rank} in it")
        link.what = f"{link.what} (the coordinator's cpu_group)"
        return link
    if dist is not None and isinstance(group, _group_types(dist)):
        return _torch_link(dist, group, f"the torch.distributed group ({type(group).__name__})")
    if _is_stateless(dist, group):
        return StoreLink(group.store, group.rank, group.world_size,
                         "the StatelessProcessGroup's store")
    if type(group).__module__.startswith("mpi4py") or (
            hasattr(group, "allgather") and hasattr(group, "Get_rank")):
        return MpiLink(group)
    if callable(group):
        return CallableLink(group)
    raise TypeError(
        f"comm_group must be a torch.distributed group (a ProcessGroup, a c10d backend "
        f"such as ProcessGroupGloo, a vLLM/SGLang GroupCoordinator, a vLLM "
        f"StatelessProcessGroup), an mpi4py communicator or a callable, not "
        f"{type(group).__name__}")


def _default_link(world_size: Optional[int]) -> Link:
    """No group named: world_size 1 needs none; more ranks use the default
    torch.distributed group only when it has exactly world_size ranks."""
    if world_size in (None, 1):
        return Alone()
    dist = _torch_dist()
    if dist is None or not dist.is_initialized():
        raise ValueError(
            f"world_size={world_size} needs an exchange: pass comm_group= (a torch.distributed "
            f"group, a vLLM/SGLang coordinator or an mpi4py communicator), or exchange= (a "
            f"callable), or initialise torch.distributed so its default group can be used")
    world = dist.group.WORLD
    if world.size() != world_size:
        raise ValueError(
            f"world_size={world_size}, but the default torch.distributed group has "
            f"{world.size()} ranks: pass the group of these {world_size} ranks as comm_group= "
            f"(the default group is used only when it is exactly that group)")
    return _torch_link(dist, world, "the default torch.distributed group")


def resolve(group: Any, exchange: Any, world_size: Optional[int]) -> Link:
    """The link for this call. Its errors are raised at once, on this rank:
    a rank that cannot name its group cannot tell the others anything."""
    if exchange is not None:
        if group is not None:
            raise ValueError("pass either comm_group=/tp_group= or exchange=, not both")
        if not callable(exchange):
            raise TypeError(f"exchange must be callable, not {type(exchange).__name__}")
        return CallableLink(exchange)
    if group is None:
        return _default_link(world_size)
    return link_for(group)
