#!/usr/bin/env python3
"""Writes the checked-in seed corpus of decode_push_fuzzer (tests/fuzz/corpus/): valid sparse,
dense, fp16, bf16, compactly coded (delta-vbyte, bitmap) and control messages in the harness's input layout (the registrations, barriers,
heartbeats and FINISHED of a whole job at the harness's scheduler, and the scheduler's own
messages), plus near misses. The protocol version is read from proto/codec.h. Rerun after a
wire-format change: python3 tests/fuzz/make_corpus.py"""
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")
with open(os.path.join(HERE, "..", "..", "proto", "codec.h")) as _codec:
    VERSION = int(re.search(r"kProtocolVersion = (\d+);", _codec.read()).group(1))


def varint(v):
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, v):
    return varint(num << 3) + varint(v)


def sub(num, payload):
    """A length-delimited field: a string or an embedded message."""
    return varint((num << 3) | 2) + varint(len(payload)) + payload


def header(type_, sender=4, round_=0, shard=1, count=0, flags=0, body=b""):
    h = field(1, VERSION) + field(2, type_) + field(3, sender) + field(5, round_) + field(6, shard)
    h += field(7, count) + field(8, flags)
    return h + body


def pack(frames):
    data = bytes([len(frames) - 1])
    for i, f in enumerate(frames):
        if i + 1 < len(frames):
            data += struct.pack("<H", len(f))
        data += f
    return data


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    idx = struct.pack("<3I", 1, 5, 36)
    val = struct.pack("<3f", 0.5, -1.0, 2.0)
    for w in range(3):
        seeds["sparse_w%d" % w] = [header(11, sender=3 + w, count=3), idx, val]
    seeds["sparse_round1"] = [header(11, round_=1, count=3), idx, val]
    seeds["empty_push"] = [header(11, count=0), b"", b""]
    seeds["dense"] = [header(11, count=37, flags=2), struct.pack("<37f", *[0.1] * 37)]
    seeds["fp16"] = [header(11, count=3, flags=1), idx, struct.pack("<3H", 0x3C00, 0xBC00, 0x4000)]
    seeds["dense_fp16"] = [header(11, count=37, flags=3), struct.pack("<37H", *[0x3C00] * 37)]
    # Protocol 7's compact index frames: {1, 5, 36} as Stream VByte gaps (1, 4, 31: one byte
    # each, control byte 0) and as a bitmap from base 1 (bits 0, 4, 35), with bf16 values.
    seeds["delta_vbyte"] = [header(11, count=3, flags=16), bytes([0, 1, 4, 31]), val]
    bitmap = bytearray(5)
    for i in (1, 5, 36):
        bitmap[(i - 1) // 8] |= 1 << ((i - 1) % 8)
    seeds["bitmap"] = [header(11, count=3, flags=32), struct.pack("<I", 1) + bytes(bitmap), val]
    seeds["delta_vbyte_bf16"] = [header(11, count=3, flags=16 | 8), bytes([0, 1, 4, 31]),
                                 struct.pack("<3H", 0x3F80, 0xBF80, 0x4000)]
    seeds["bitmap_update"] = [header(12, count=3, flags=32), struct.pack("<I", 1) + bytes(bitmap),
                              val]
    seeds["unsorted"] = [header(11, count=3), struct.pack("<3I", 5, 1, 2), val]
    seeds["range"] = [header(11, count=1), struct.pack("<I", 37), struct.pack("<f", 1.0)]
    seeds["nan"] = [header(11, count=1), struct.pack("<I", 0), struct.pack("<I", 0x7FC00000)]
    seeds["pull_dense"] = [header(13)]
    seeds["heartbeat"] = [header(6, sender=0, shard=0, body=varint((24 << 3) | 2) + b"\x00")]
    seeds["update"] = [header(12, count=3), idx, val]
    # Control messages. The harness's scheduler expects 1 server and 2 workers (ids 1, 2, 3).
    for name, role, rank, inst in (("register_server", 2, 0, 11), ("register_worker0", 3, 0, 12),
                                   ("register_worker1", 3, -1, 13)):
        reg = (field(1, role) + sub(2, b"127.0.0.1") + field(3, 5000 + inst) + field(4, VERSION)
               + field(5, rank) + field(6, inst) + field(7, 101))
        seeds[name] = [header(1, sender=-1, shard=-1, body=sub(20, reg))]
    seeds["register_bad_d"] = [header(1, sender=-1, body=sub(20, field(1, 3) + sub(2, b"h")
                                                              + field(3, 1) + field(4, VERSION)
                                                              + field(7, 5)))]
    for node in (1, 2, 3):
        seeds["barrier_%d" % node] = [header(4, sender=node, body=sub(23, field(1, 3) + field(2, 1)))]
    seeds["heartbeat_2"] = [header(6, sender=2, body=sub(24, b""))]
    seeds["finished_2"] = [header(9, sender=2, body=sub(27, b""))]
    info = (field(1, 1) + field(2, 2) + field(3, 0) + sub(4, b"127.0.0.1") + field(5, 5011)
            + field(7, 101) + field(8, 11))
    seeds["node_table"] = [header(3, sender=0, body=sub(22, field(1, 101) + field(2, 1)
                                                        + field(3, 2) + sub(4, info)
                                                        + field(5, 1)))]
    seeds["node_dead"] = [header(7, sender=0, body=sub(25, field(1, 2) + field(2, 3)
                                                       + field(3, 0) + sub(4, b"x")))]
    seeds["shutdown"] = [header(8, sender=0, body=sub(26, sub(1, b"done") + field(2, 1)))]
    seeds["join"] = [header(15, sender=2, round_=3, shard=0)]
    for name, frames in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(pack(frames))


if __name__ == "__main__":
    main()
