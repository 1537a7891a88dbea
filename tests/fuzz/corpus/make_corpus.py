#!/usr/bin/env python3
# Why: the seed corpora are small files in the readers' real formats (valid
# ones and edge cases), written by this script so they can be regenerated and
# read: `python3 tests/fuzz/corpus/make_corpus.py` rewrites them in place.
# Formats: data/token_file.h (.ltok), train/checkpoint/safetensors.h,
# data/shard_reader.h (first byte 0 = plain .jsonl, 1 = .jsonl.zst: see
# tests/fuzz/shard_reader_fuzz.cc), train/train.proto, data/tokenizer.h.
import json, os, struct, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
M = (1 << 64) - 1
P1, P2, P3, P4, P5 = 11400714785074694791, 14029467366897019727, 1609587929392839161, 9650029242287828579, 2870177450012600261
rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & M

def xxh64(data, seed=0):
    def rnd(acc, lane): return (rotl((acc + lane * P2) & M, 31) * P1) & M
    def merge(acc, v): return ((acc ^ rnd(0, v)) * P1 + P4) & M
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while i + 32 <= n:
            for k in range(4): v[k] = rnd(v[k], struct.unpack_from("<Q", data, i + 8 * k)[0])
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for k in range(4): h = merge(h, v[k])
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", data, i)[0]), 27) * P1 + P4) & M; i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (struct.unpack_from("<I", data, i)[0] * P1 & M), 23) * P2 + P3) & M; i += 4
    while i < n:
        h = (rotl(h ^ (data[i] * P5 & M), 11) * P1) & M; i += 1
    h ^= h >> 33; h = h * P2 & M; h ^= h >> 29; h = h * P3 & M; h ^= h >> 32
    return h

def ltok(docs, vocab, name=b"byte", checksum=True):
    width = 2 if vocab <= 65536 else 4
    toks = [t for d in docs for t in d]
    hb = (56 + len(name) + 7) // 8 * 8
    out = bytearray(b"LCTOK001" + struct.pack("<IIQQQQII", 1, width, vocab, len(toks), len(docs), hb, len(name), 0))
    out += name + b"\0" * (hb - 56 - len(name))
    out += b"".join(struct.pack("<H" if width == 2 else "<I", t) for t in toks)
    out += b"\0" * ((-len(out)) % 8)
    off = [0]
    for d in docs: off.append(off[-1] + len(d))
    out += b"".join(struct.pack("<Q", o) for o in off)
    out += struct.pack("<Q", xxh64(bytes(out)) if checksum else 0)
    return bytes(out)

def safetensors(tensors, metadata=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None: header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data

def zstd(data):
    return subprocess.run(["zstd", "-q", "-c", "-3"], input=data, check=True, capture_output=True).stdout

def write(target, name, data):
    d = os.path.join(HERE, target); os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f: f.write(data)

def main():
    write("token_file", "u16_three_docs.ltok", ltok([[1, 2, 3], [259], [7, 8]], 260))
    write("token_file", "u32_vocab70000.ltok", ltok([[69999, 0, 65536], [5]], 70000, b"json:/x/tokenizer.json"))
    write("token_file", "empty_doc.ltok", ltok([[], [4]], 260))
    write("token_file", "no_docs.ltok", ltok([], 260))
    write("token_file", "no_checksum.ltok", ltok([[1, 2], [3]], 260, checksum=False))

    f32 = struct.pack("<6f", 1, -2, 3.5, 0, 1e-3, 7)
    write("safetensors", "f32_2x3.safetensors", safetensors({"w": ("F32", [2, 3], f32)}, {"format": "pt"}))
    write("safetensors", "mixed.safetensors", safetensors({
        "a.bf16": ("BF16", [4], struct.pack("<4H", 0x3F80, 0xC000, 0, 0x7F80)),
        "b.f16": ("F16", [1, 2], struct.pack("<2H", 0x3C00, 0xBC00)),
        "c.i64": ("I64", [1], struct.pack("<q", -1)),
        "d.f64": ("F64", [2], struct.pack("<2d", 1.5, -0.25)),
        "e.empty": ("F32", [0, 3], b"")}))
    write("safetensors", "scalar.safetensors", safetensors({"s": ("F32", [], struct.pack("<f", 2.0))}))
    write("safetensors", "empty_header.safetensors", safetensors({}))

    lines = [json.dumps({"text": "Hello world.\nSecond line.", "meta": {"redpajama_set_name": "RedPajamaBook"}}),
             json.dumps({"text": "code", "meta": {"redpajama_set_name": "RedPajamaGithub"}}),
             '{"text": "esc \\u00e9 \\ud83d\\ude00"}', "", "   ", '{"text": 5}', '{"no_text": "x"}', "{bad json",
             '{"text": "lone \\ud800 surrogate"}']
    plain = ("\n".join(lines) + "\n").encode() + b'{"text": "raw \xff invalid utf8"}\n{"text": "no newline at end"}'
    write("shard_reader", "plain.jsonl", b"\0" + plain)
    write("shard_reader", "plain_filtered.jsonl", b"\2" + plain)
    z = zstd(plain)
    write("shard_reader", "one_frame.zst", b"\1" + z)
    write("shard_reader", "two_frames.zst", b"\1" + zstd(b'{"text": "a"}\n') + zstd(b'{"text": "b"}\n'))
    write("shard_reader", "truncated_frame.zst", b"\1" + z[: len(z) // 2])

    with open(os.path.join(ROOT, "configs", "demo.textproto"), "rb") as f: demo = f.read()
    write("config_loader", "demo.textproto", demo)
    write("config_loader", "demo_override.textproto", demo + b"\n--model.hidden_size=128")
    write("config_loader", "small.textproto", b'model { vocab_size: 260 hidden_size: 32 num_layers: 2 num_heads: 2 '
          b'num_kv_heads: 1 ffn_hidden_size: 64 layer_pattern: RNOPE_SWA pattern_group: 2 sliding_window: 8 }\n'
          b'data { path: "x.ltok" seq_len: 16 batch_size: 2 }\nsteps: 3\nout_dir: "runs/x"\n'
          b'\n--optim.lr=1e-3')
    write("config_loader", "custom_kinds.textproto", b'model { vocab_size: 300 hidden_size: 16 num_layers: 2 '
          b'num_heads: 1 num_kv_heads: 1 ffn_hidden_size: 8 layer_pattern: CUSTOM layer_kinds: [ROPE_FULL, NOPE_FULL] }\n'
          b'data { batch_size: 1 seq_len: 4 }\nout_dir: "o"\n--model.layer_kinds=NOPE_FULL,ROPE_SWA')

    # Byte-level BPE: the GPT-2 byte alphabet, a few merges, one added token.
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs: bs.append(b); cs.append(256 + n); n += 1
    alpha = {b: chr(c) for b, c in zip(bs, cs)}
    vocab = {alpha[b]: b for b in range(256)}
    merges = [("H", "e"), ("l", "l"), ("He", "ll"), ("Ġ", "w"), ("o", "r")]
    for l, r in merges: vocab[l + r] = len(vocab)
    pre = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": json.loads(json.dumps(LLAMA3_REGEX))}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    bpe = {"version": "1.0", "added_tokens": [{"id": len(vocab) + i, "content": c, "special": True}
                                      for i, c in enumerate(["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"])],
           "normalizer": None, "pre_tokenizer": pre,
           "model": {"type": "BPE", "dropout": None, "ignore_merges": True, "vocab": vocab,
                     "merges": [l + " " + r for l, r in merges[:3]] + [list(m) for m in merges[3:]]}}
    write("tokenizer", "bpe.tokenizer.json", json.dumps(bpe, ensure_ascii=False).encode())
    pieces = [{"piece": "<unk>", "score": 0, "type": "unknown"}, {"piece": "<s>", "score": 0, "type": "control"},
              {"piece": "</s>", "score": 0, "type": "control"}]
    pieces += [{"piece": "<0x%02X>" % b, "score": 0, "type": "byte"} for b in range(256)]
    pieces += [{"piece": p, "score": -i, "type": "normal"} for i, p in enumerate(["\u2581", "\u2581H", "el", "lo", "H", "e", "l", "o"])]
    sp = {"format": "longctx-sentencepiece-bpe", "version": 1, "add_dummy_prefix": True, "byte_fallback": True,
          "unk_id": 0, "bos_id": 1, "eos_id": 2, "pieces": pieces}
    write("tokenizer", "sentencepiece.json", json.dumps(sp, ensure_ascii=False).encode())
    write("tokenizer", "not_object.json", b"[1, 2, 3]")

# The Llama-3 split regex (data/llama3_tokenizer.cc kLlama3SplitRegex).
LLAMA3_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")

if __name__ == "__main__":
    main()
