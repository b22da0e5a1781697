# SPDX-License-Identifier: Apache-2.0
"""Argument mistakes are ValueError/TypeError at the call (agreed across
ranks, errno EINVAL), sizes cannot wrap modulo 2**64, and the timeout
takes seconds or a timedelta with one meaning for 0."""
import datetime
import errno

import pytest

import sharedseg
from sharedseg import SharedSegmentError, create_shared_segment
from thread_ranks import run_ranks

KV = {"k": dict(count=2, shape=(4, 8), dtype="float32")}


@pytest.mark.parametrize("kwargs,kind,needle", [
    # Defect 10 of the hardening issue: each was silent, raw or late before.
    (dict(timeout=-1), ValueError, "timeout=-1"),
    (dict(timeout=1e12), ValueError, "at most 2147483 s"),
    (dict(timeout=float("nan")), ValueError, "timeout=nan"),
    (dict(timeout=float("inf")), ValueError, "at most"),
    (dict(timeout="30"), TypeError, "timeout must be seconds"),
    (dict(timeout=True), TypeError, "timeout must be seconds"),
    (dict(pages="hugepages"), ValueError, "unknown pages 'hugepages'"),
    (dict(backend="unknown"), ValueError, "unknown backend"),
    (dict(numa="far"), ValueError, "unknown numa"),
    (dict(populate="eager"), ValueError, "unknown populate"),
    (dict(layout="diagonal"), ValueError, "layout='diagonal'"),
    (dict(align=3000), ValueError, "power of two"),
    (dict(owner_rank=1), ValueError, "owner_rank=1"),
    (dict(owner_rank=-1), ValueError, "owner_rank must be at least 0"),
    (dict(populate_threads=1000), ValueError, "populate_threads=1000"),
    (dict(device_id=-2), ValueError, "device_id must be at least 0"),
    (dict(hugetlb=True, pages="thp"), ValueError, "hugetlb=True asks for HugeTLB"),
    (dict(mmap=False, backend="memfd"), ValueError, "mmap=False selects"),
])
def test_argument_mistakes_are_value_or_type_errors_with_einval(kwargs, kind, needle):
    with pytest.raises(kind) as info:
        create_shared_segment("py-args", KV, pages=kwargs.pop("pages", "base"), **kwargs)
    err = info.value
    assert isinstance(err, SharedSegmentError) and err.errno == errno.EINVAL, err
    assert needle in str(err) and "rank 0 failed in setup" in str(err), str(err)


@pytest.mark.parametrize("blocks,size,kwargs,kind,needle", [
    # Sizes that wrapped modulo 2**64: a 4 KiB segment claiming 2**62+1
    # floats, 2**64+1 entries read as 1.
    ({"k": dict(count=1, shape=(2**62 + 1,), dtype="float32")}, None, {}, ValueError,
     "more than 2**64-1"),
    ({"k": dict(count=2**64 + 1, shape=(4,), dtype="float32")}, None, {}, ValueError,
     "count=18446744073709551617 is more than"),
    ({"k": dict(count=2**40, shape=(2**30,), dtype="float32")}, None, {}, ValueError,
     "more than 2**64-1"),
    ({"k": dict(count=1, shape=(2**32, 2**32), dtype="uint8")}, None, {}, ValueError,
     "more than 2**64-1"),
    (None, 2**64, {}, ValueError, "size=18446744073709551616 is more than"),
    (None, "abc", {}, ValueError, "abc"),
    (None, 0, {}, ValueError, "give blocks= (a layout) or size= (bytes)"),
    (None, None, {}, ValueError, "give blocks= (a layout) or size= (bytes)"),
    # layout= and align= place blocks: without blocks they were ignored.
    (None, 4096, dict(layout="grouped"), ValueError, "layout='grouped' places blocks"),
    (None, 4096, dict(align=8192), ValueError, "align=8192 places blocks"),
    ({0: dict(count=1, shape=(4,), dtype="float32")}, None, {}, TypeError,
     "block names are str, not int"),
    ({"k": dict(count=1, shape=(4,), dtype="float128")}, None, {}, TypeError,
     "dtype 'float128' is not one of"),
    ({"k": dict(count=1, shape=(4,), dtype="float32", stride=2)}, None, {}, TypeError,
     "unknown keys ['stride']"),
    ({"k": dict(count=True, shape=(4,), dtype="float32")}, None, {}, TypeError,
     "count must be an int, not bool"),
    ({"k": dict(count=1, shape=(0,), dtype="float32")}, None, {}, ValueError,
     "shape must be at least 1"),
    ({"k": [1, 2]}, None, {}, TypeError, "expected dict(count=, shape=, dtype=)"),
])
def test_sizes_are_checked_not_wrapped(blocks, size, kwargs, kind, needle):
    with pytest.raises(kind) as info:
        create_shared_segment("py-sizes", blocks, size=size, pages="base", **kwargs)
    assert needle in str(info.value), str(info.value)
    assert info.value.errno == errno.EINVAL


def test_names_that_cannot_be_utf8_or_the_library_refuses():
    with pytest.raises(ValueError, match="lone surrogate") as info:
        create_shared_segment("kv\ud800", KV, pages="base")
    assert "failed in setup" in str(info.value)
    with pytest.raises(ValueError, match="NUL character") as info:
        create_shared_segment("kv\0x", KV, pages="base")
    assert "failed in setup" in str(info.value)
    with pytest.raises(TypeError, match="name must be a str"):
        create_shared_segment(b"kv", KV, pages="base")
    # The C library's own checks (length) arrive as ValueError too.
    with pytest.raises(ValueError, match="name must be 1 to 63 bytes") as info:
        create_shared_segment("n" * 64, KV, pages="base")
    assert info.value.errno == errno.EINVAL and "failed in create" in str(info.value)


def test_the_extension_refuses_what_64_bits_cannot_hold():
    from sharedseg import _native
    with pytest.raises(ValueError, match="outside 0..2"):
        _native.Layout([("k", 2**64 + 1, 4, 0, None)])
    with pytest.raises(ValueError, match="outside 0..2"):
        _native.Layout([("k", 1, -4, 0, None)])
    with pytest.raises(ValueError, match="outside 0..2"):
        _native.create("x", 1, 0, 0, size=2**64)
    with pytest.raises(ValueError, match="outside 0..2"):
        _native.probe(2**64)
    # The C layout builder refuses a product that overflows.
    with pytest.raises(ValueError) as info:
        _native.Layout([("k", 2**62, 8, 0, None)])
    assert info.value.errno == errno.EOVERFLOW, info.value


def test_a_mistake_on_one_rank_is_the_same_value_error_on_every_rank():
    def make(r, gather):
        return create_shared_segment("py-args-agreed", KV, world_size=3, rank_id=r,
                                     exchange=gather, pages="base",
                                     timeout=-1 if r == 1 else 5)
    for e in run_ranks(3, make):
        assert isinstance(e, sharedseg.SharedSegmentValueError) and isinstance(e, ValueError), e
        assert e.errno == errno.EINVAL and set(e.failures) == {1}
        assert "rank 1 failed in setup: timeout=-1" in str(e)


def test_errno_is_never_zero():
    # A failure of the exchange itself: not an argument, still an errno.
    def broken(mine):
        raise OSError("the wire is cut")
    with pytest.raises(SharedSegmentError) as info:
        create_shared_segment("py-args-errno", KV, world_size=2, rank_id=0, exchange=broken,
                              pages="base")
    assert info.value.errno and "the wire is cut" in str(info.value)


def test_a_status_record_the_exchange_mangled_is_said_so():
    """The status records are the library's frame, read by the library: bytes
    that are none fail the call with its sentence, naming the rank."""
    from sharedseg import _errors

    def mangling(mine):
        return [b"x" * len(mine) if len(mine) == _errors.RECORD_SIZE else mine]
    with pytest.raises(SharedSegmentError) as info:
        create_shared_segment("py-args-mangled", KV, world_size=1, exchange=mangling,
                              pages="base")
    assert ("rank 0's status record: expected a rank's status, got bytes that are no frame "
            "of this library: the exchange returned something other than what rank 0 sent"
            in str(info.value)), info.value


def test_a_status_record_carries_a_failure_whole():
    from sharedseg import _errors
    sent = _errors.Status(False, "complete", errno.ENOSPC, "no room \u00e9" * 3, b"h" * 32,
                          kind=_errors.KIND_VALUE)
    got = _errors.Status.decode(2, sent.encode())
    assert (got.ok, got.phase, got.errno, got.message, got.host_id, got.kind) == \
        (False, "complete", errno.ENOSPC, "no room \u00e9" * 3, b"h" * 32, _errors.KIND_VALUE)
    assert _errors.Status.decode(0, _errors.Status(host_id=b"i" * 32).encode()).ok


@pytest.mark.parametrize("timeout,seconds,source", [
    (None, 30.0, "default"),
    (0, 30.0, "default (timeout=0)"),
    (datetime.timedelta(0), 30.0, "default (timeout=0)"),
    (datetime.timedelta(seconds=12, milliseconds=500), 12.5, "argument"),
    (7, 7.0, "argument"),
    (0.25, 0.25, "argument"),
])
def test_timeout_takes_seconds_or_timedelta_and_0_is_the_default(timeout, seconds, source):
    with create_shared_segment("py-timeout", KV, pages="base", populate="lazy",
                               timeout=timeout) as seg:
        assert seg.info["settings"]["timeout"] == {"value": seconds, "source": source}
        assert seg.info["settings"]["populate_allowance"]["value"] == 0.0


def test_population_is_allowed_for_on_top_of_the_timeout():
    from sharedseg import _native, _options

    def allowance(pages, populate):
        return _options.population_allowance(64 << 30, _native.parse("pages", pages),
                                             _native.parse("populate", populate))
    assert allowance("base", "owner") == 128.0
    assert allowance("hugetlb-2M", "spread") == 64.0
    assert allowance("base", "lazy") == 0.0
    with create_shared_segment("py-allowance", size="64MiB", pages="base", timeout=3) as seg:
        settings = seg.info["settings"]
        assert settings["timeout"]["value"] == 3.0
        assert settings["populate_allowance"]["value"] == 0.125


@pytest.mark.parametrize("variable,value,setting,shown", [
    ("SHAREDSEG_PAGES", "base", "pages", "base"),
    ("SHAREDSEG_NUMA", "interleave", "numa", "interleave"),
    ("SHAREDSEG_POPULATE", "lazy", "populate", "lazy"),
])
def test_environment_defaults_apply_when_the_argument_is_not_given(monkeypatch, variable, value,
                                                                   setting, shown):
    monkeypatch.setenv(variable, value)
    kwargs = {} if setting == "pages" else {"pages": "base"}
    with create_shared_segment("py-env", KV, **kwargs) as seg:
        assert seg.info["settings"][setting] == {"value": shown, "source": variable}
        if setting == "pages":
            assert seg.info["pages"] == "base"
    # The argument wins over the environment.
    with create_shared_segment("py-env", KV, pages="base", numa="none", populate="owner") as seg:
        assert seg.info["settings"][setting]["source"] == "argument"


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("SHAREDSEG_PAGES", "hugepages")
    with pytest.raises(ValueError, match="SHAREDSEG_PAGES='hugepages': unknown pages"):
        create_shared_segment("py-env-bad", KV)


def test_world_size_and_rank_with_a_callable():
    with pytest.raises(ValueError, match="needs world_size="):
        create_shared_segment("py-args-callable", KV, exchange=lambda m: [m])
    with pytest.raises(ValueError, match="needs rank_id="):
        create_shared_segment("py-args-callable", KV, world_size=2, exchange=lambda m: [m])
    with create_shared_segment("py-args-callable", KV, world_size=1, exchange=lambda m: [m],
                               pages="base") as seg:
        assert (seg.world_size, seg.rank) == (1, 0)


def test_repr_shows_the_page_kind():
    with create_shared_segment("py-repr", KV, pages="base") as seg:
        text = repr(seg)
        assert text.startswith("<SharedSegment 'py-repr' rank 0/1 owner 0 8 KiB base (4 KiB pages)")
    assert repr(seg).endswith("closed>")


def test_info_reports_pinned_and_the_memfd_name():
    with create_shared_segment("py-info-name", KV, pages="base") as seg:
        info = seg.info
        assert info["pinned"] is False and info["memfd_name"] == "/memfd:sseg:py-info-name"
        with open("/proc/self/maps") as f:
            assert "/memfd:sseg:py-info-name" in f.read()
