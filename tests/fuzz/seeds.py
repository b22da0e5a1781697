#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the hand-made seeds of each fuzz target into tests/fuzz/corpus/
(the rest of the corpus is what `make fuzz` found and merged). Each seed
is named after what it is; the formats are described at the top of each
fuzz_NAME.c."""
import os
import struct
import sys

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
BLOB = 4096

# Field offsets of a blob (src/blob.c).
FIELDS = dict(status=8, rank=12, fingerprint=16, boot_id=24, netns=40, pidns=48, uid=56,
              pid=60, name=64, layout_hash=128, size=136, pages=144, backend=152,
              flags=160, populate=168, world=176, owner=184, numa=192, numa_node=200,
              handle_kind=256, handle_pages=260, handle_page_size=264,
              handle_mapped=272, handle_sock=280, error=480, layout=1024)


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def edit(rank, field, data):
    off = rank * BLOB + FIELDS[field]
    return struct.pack("<HB", off, len(data)) + data


def blob_seeds():
    write("blob", "valid-as-rank0", b"\x00")
    write("blob", "valid-as-rank3", b"\x03")
    write("blob", "bad-checksum", b"\x05" + edit(1, "size", b"\x01"))
    cases = dict(
        rank=(1, "rank", struct.pack("<I", 2)),
        world=(2, "world", struct.pack("<I", 5)),
        owner=(1, "owner", struct.pack("<I", 1)),
        owner_outside=(3, "owner", struct.pack("<I", 9)),
        size=(2, "size", struct.pack("<Q", 12289)),
        pages=(1, "pages", struct.pack("<I", 2)),
        backend=(1, "backend", struct.pack("<I", 2)),
        flags=(3, "flags", struct.pack("<I", 3)),
        populate=(1, "populate", struct.pack("<I", 1)),
        layout_hash=(2, "layout_hash", b"\xff"),
        numa=(1, "numa", struct.pack("<I", 1)),
        fingerprint=(1, "fingerprint", b"\x01"),
        other_host=(3, "boot_id", b"other-host"),
        other_netns=(2, "netns", b"\x07"),
        other_uid=(1, "uid", struct.pack("<I", 65534)),
        name=(1, "name", b"other"),
        failed=(2, "status", struct.pack("<i", -12)),
        no_handle=(0, "handle_kind", struct.pack("<I", 0)),
        fabric=(0, "handle_kind", struct.pack("<I", 2)),
        odd_page=(0, "handle_page_size", struct.pack("<Q", 12288)),
        huge_page=(0, "handle_page_size", struct.pack("<Q", 1 << 40)),
        mapped=(0, "handle_mapped", struct.pack("<Q", 1)),
        sock=(0, "handle_sock", b"x" * 48),
        layout_len=(1, "layout", struct.pack("<H", 4000)),
        layout_text=(2, "layout", struct.pack("<H", 12) + b"v1;order=x;a"),
    )
    for name, (rank, field, data) in cases.items():
        write("blob", name, bytes([rank % 4 ^ 1]) + edit(rank, field, data))
    # The same layout text with another hash, on rank 0 and rank 2.
    write("blob", "layout-hash-both", b"\x01" + edit(0, "layout_hash", b"\x01") +
          edit(2, "layout_hash", b"\x02"))


def parse_seeds():
    words = ["4096", "256MiB", "256M", "4G", "1.5GiB", "0.5K", "16E", "16EiB",
             "18446744073709551615", "18446744073709551616", "1.0000000000000000001K",
             "12 KiB", "-1", "", "auto", "base", "thp", "hugetlb", "HUGETLB-2M", "hugetlb-1G",
             "none", "interleave", "device-local", "0", "63", "64", "memfd", "cuda", "ascend",
             "owner", "spread", "lazy", "1e3"]
    for i, w in enumerate(words):
        write("parse", f"{i:02d}", w.encode())


def description(count=3, shape="bfloat16[512]", size=12288):
    return (f"v1;order=interleaved;align=4096;size={size};"
            f"k:count={count},bytes=1024,align=4096,offset=0,shape={shape};"
            f"v:count=2,bytes=100,align=4096,offset=4096,shape=float16[50]").encode()


def layout_diff_seeds():
    a = description()
    write("layout_diff", "same", a)
    write("layout_diff", "count", description(4, size=16384) + b"\0" + a + b"\xff")
    write("layout_diff", "shape", description(shape="float32[256]") + b"\0" + a + b"\x10")
    write("layout_diff", "cut", a[:40] + b"\0" + a + b"\x00")
    write("layout_diff", "extra-block", a + b";w:count=1" + b"\0" + a + b"\x40")
    write("layout_diff", "garbage", b";;::,,==" + b"\0" + b"v1;;;" + b"\x03")


def number(v):
    return bytes([64]) + struct.pack("<Q", v)


def block(name, count, nbytes, align_exp=0, shape=None):
    out = bytes([len(name)]) + name + number(count) + number(nbytes) + bytes([align_exp])
    if shape is None:
        return out + b"\x00"
    return out + b"\x01" + bytes([len(shape)]) + shape


def layout_seeds():
    two = block(b"k", 3, 1024, 0, b"bfloat16[512]") + block(b"v", 2, 100, 7, b"float16[50]")
    write("layout", "interleaved", bytes([2]) + b"\x00" + two)
    write("layout", "grouped", bytes([2 | 1 << 4]) + b"\x0d" + two)
    write("layout", "bad-order", bytes([1 | 2 << 4]) + b"\x00" + block(b"k", 1, 1))
    write("layout", "huge", bytes([2]) + b"\x00" + block(b"k", 1 << 62, 1 << 20) +
          block(b"v", 1 << 63, 3))
    write("layout", "same-name", bytes([2]) + b"\x00" + block(b"k", 1, 1) + block(b"k", 2, 2))
    write("layout", "bad-name", bytes([1]) + b"\x00" + block(b"a;b", 1, 1))
    write("layout", "many", bytes([9]) + b"\x00" +
          b"".join(block(bytes([97 + i]), i + 1, 7 * i + 1, i) for i in range(9)))


def frame(kind, arg=0, world=0, length=0, code=0, fmt=1):
    """src/frame.h's head: magic, kind, format, code, arg, aux, len."""
    return struct.pack("<IHHiIII", 0x46475353, kind, fmt, code, arg & 0xffffffff, world,
                       length & 0xffffffff)


def exchange_seeds():
    write("exchange", "hello-rank2", b"\x00" + frame(1, 2, 3))
    write("exchange", "hello-rank1", b"\x00" + frame(1, 1, 3))
    write("exchange", "hello-rank0", b"\x00" + frame(1, 0, 3))
    write("exchange", "hello-world4", b"\x00" + frame(1, 2, 4))
    write("exchange", "half-hello", b"\x00" + frame(1, 2, 3)[:10])
    write("exchange", "data-as-hello", b"\x00" + frame(2, 0, 0, 8))
    write("exchange", "data", b"\x01" + frame(2, 0, 0, 8) + b"\x12" * 8)
    write("exchange", "data-short", b"\x01" + frame(2, 0, 0, 8) + b"\x12" * 5)
    write("exchange", "data-long", b"\x01" + frame(2, 0, 0, 9) + b"\x12" * 9)
    write("exchange", "data-huge", b"\x01" + frame(2, 0, 0, (1 << 32) - 1))
    write("exchange", "status", b"\x01" + frame(3, 0, 0, 4, code=-5) + b"oops")
    write("exchange", "hello-again", b"\x01" + frame(1, 2, 3))


def frame_seeds():
    """fuzz_frame: a kind byte (what the reader expects), then a head and a
    body, received as sseg_frame_recv would."""
    write("frame", "hello", b"\x01" + frame(1, 2, 3))
    write("frame", "wrong-kind", b"\x04" + frame(1, 2, 3))
    write("frame", "token", b"\x04" + frame(4, 1, 0, 16) + b"t" * 16)
    write("frame", "token-long", b"\x04" + frame(4, 1, 0, 17) + b"t" * 17)
    write("frame", "fd", b"\x05" + frame(5, 0, 0, 8) + struct.pack("<Q", 1 << 20))
    write("frame", "failure", b"\x06" + frame(6, 0, 0, 9, code=-110) + b"timed out")
    write("frame", "failure-past-errno", b"\x06" + frame(6, 0, 0, 1, code=-9999) + b"x")
    write("frame", "positive-code", b"\x07" + frame(7, 0, 0, 0, code=3))
    write("frame", "format-2", b"\x08" + frame(8, 1, 0, 0, fmt=2))
    write("frame", "keeper-long", b"\x08" + frame(8, 1, 0, 1025) + b"k" * 64)
    write("frame", "status", b"\x09" + frame(9, 2, 1, 40, code=-22) + b"h" * 32 + b"bad size")
    write("frame", "cut", b"\x09" + frame(9, 2, 1, 40)[:13])


def pool_seeds():
    """Steps of fuzz_pool.c: op byte, key byte, operands."""
    def store(k):
        return bytes([0, k])

    def get(k):
        return bytes([1, k])

    def scribble(offset, data):
        return bytes([3, 0]) + struct.pack("<QB", offset, len(data)) + data
    write("pool", "store-then-get", store(1) + store(2) + get(1) + get(2) + get(3))
    write("pool", "evict-all", b"".join(store(k) for k in range(24)) + get(0) + get(23))
    write("pool", "drop-pinned", store(5) + get(5) + bytes([2, 5]) + get(5))
    # the slots come first: 32 of 64 bytes, then the chunks' records
    write("pool", "scribble-a-record", store(1) + scribble(32 * 64 + 8, b"\xff" * 8) + get(1)
          + bytes([4, 0]) + get(1))
    write("pool", "scribble-a-control-word", store(1) + store(2) + scribble(32 * 64, b"\x07" * 8)
          + get(1) + get(2))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        CORPUS = sys.argv[1]
    blob_seeds()
    parse_seeds()
    layout_diff_seeds()
    layout_seeds()
    exchange_seeds()
    frame_seeds()
    pool_seeds()
