#!/usr/bin/env python3
"""Why: an independent reader of TensorBoard event files for
tests/report/tensorboard_test.cc — plain Python, no TensorFlow or protobuf
package: its own CRC32C, TFRecord framing and protobuf wire-format parser, with
the field numbers of tensorflow/core/util/event.proto and
tensorflow/core/framework/summary.proto. Prints one JSON object per record;
exits 1 on a CRC mismatch or a truncated record."""
import json
import struct
import sys

_TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _TABLE.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def fields(buf):
    """Yields (field number, wire type, value) of one message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = varint(buf, pos)
        elif wt == 1:
            v = buf[pos:pos + 8]
            pos += 8
        elif wt == 2:
            n, pos = varint(buf, pos)
            v = buf[pos:pos + n]
            pos += n
        elif wt == 5:
            v = buf[pos:pos + 4]
            pos += 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def varint(buf, pos):
    shift = v = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def f64(b):
    return struct.unpack("<d", b)[0]


def histo(buf):
    h = {"bucket_limit": [], "bucket": []}
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for num, wt, v in fields(buf):
        if num in names:
            h[names[num]] = f64(v)
        elif num in (6, 7):
            key = "bucket_limit" if num == 6 else "bucket"
            if wt == 2:  # packed
                h[key] += [f64(v[i:i + 8]) for i in range(0, len(v), 8)]
            else:
                h[key].append(f64(v))
    return h


def value(buf):
    out = {}
    for num, wt, v in fields(buf):
        if num == 1:
            out["tag"] = v.decode()
        elif num == 2:
            out["simple_value"] = struct.unpack("<f", v)[0]
        elif num == 4:
            img = {}
            for n2, _, v2 in fields(v):
                if n2 in (1, 2, 3):
                    img[{1: "height", 2: "width", 3: "colorspace"}[n2]] = v2
                elif n2 == 4:
                    img["png_bytes"] = len(v2)
                    img["png_signature_ok"] = v2[:8] == b"\x89PNG\r\n\x1a\n"
            out["image"] = img
        elif num == 5:
            out["histo"] = histo(v)
    return out


def main(path):
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        if len(data) - pos < 12:
            sys.exit("truncated header at byte %d" % pos)
        (n,) = struct.unpack("<Q", data[pos:pos + 8])
        (len_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(data[pos:pos + 8]) != len_crc:
            sys.exit("length CRC mismatch at byte %d" % pos)
        rec = data[pos + 12:pos + 12 + n]
        (data_crc,) = struct.unpack("<I", data[pos + 12 + n:pos + 16 + n])
        if len(rec) != n or masked(rec) != data_crc:
            sys.exit("data CRC mismatch at byte %d" % pos)
        pos += 16 + n
        ev = {"step": 0}
        for num, _, v in fields(rec):
            if num == 1:
                ev["wall_time"] = f64(v)
            elif num == 2:
                ev["step"] = v
            elif num == 3:
                ev["file_version"] = v.decode()
            elif num == 5:
                ev["values"] = [value(v2) for n2, _, v2 in fields(v) if n2 == 1]
        print(json.dumps(ev))


if __name__ == "__main__":
    main(sys.argv[1])
