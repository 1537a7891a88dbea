// Why: safetensors files are the checkpoint and the bridge to Hugging Face, so
// the bytes must be exactly the reference format, every malformed file must be
// refused with a message naming the file and the tensor, and a write that
// fails (full disk, size limit, permissions) must say so and leave no partial
// file behind — also as root, as CI runs: the permissions case drops root's
// override capabilities rather than skipping.
#include "train/checkpoint/safetensors.h"

#include <linux/capability.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

class SafetensorsTest : public ::testing::Test {
 protected:
  // A test may leave the directory unwritable; TempDir removes it afterwards.
  void TearDown() override { chmod(dir_.c_str(), 0755); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  static std::string ReadAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // A file with length field `len`, header text `header` and `data_bytes` zero bytes.
  std::string MakeFile(const std::string& name, uint64_t len, const std::string& header,
                       size_t data_bytes) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(len >> (8 * i));
    bytes += header;
    bytes.append(data_bytes, '\0');
    const std::string p = Path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  // A file whose length field matches `header`.
  std::string MakeFile(const std::string& name, const std::string& header, size_t data_bytes) {
    return MakeFile(name, header.size(), header, data_bytes);
  }

  ::longctx::testing::TempDir tmp_;
  std::string dir_ = tmp_.path();
};

TEST_F(SafetensorsTest, RoundTripAllDTypes) {
  std::vector<float> f32 = {1.f, -2.5f, 3.25f, 0.f, 1e-30f, -7.f};
  std::vector<double> f64 = {1.0 / 3.0, -1e300, 2.0, 4.5};
  std::vector<int32_t> i32 = {-2147483647 - 1, 0, 2147483647};
  std::vector<uint16_t> bf16 = {0x3F80, 0xC020, 0x7F80, 0x0001, 0x8000};
  float scalar = 42.5f;
  std::vector<SafetensorsEntry> entries = {
      {"w.f32", DType::kF32, {2, 3}, f32.data()},
      {"w.f64", DType::kF64, {4}, f64.data()},
      {"w.i32", DType::kI32, {3, 1}, i32.data()},
      {"w.bf16", DType::kBF16, {5}, bf16.data()},
      {"scalar", DType::kF32, {}, &scalar},
      {"empty", DType::kF32, {0, 4}, nullptr},
  };
  const std::string p = Path("all.safetensors");
  ASSERT_TRUE(WriteSafetensors(p, entries, {{"step", "12"}}).ok());

  absl::StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->names(),
            (std::vector<std::string>{"empty", "scalar", "w.bf16", "w.f32", "w.f64", "w.i32"}));
  EXPECT_EQ(r->metadata().at("format"), "pt");
  EXPECT_EQ(r->metadata().at("step"), "12");
  EXPECT_EQ(r->header_bytes() % 8, 0u);

  absl::StatusOr<SafetensorsTensorInfo> info = r->Info("w.f32");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->dtype_name, "F32");
  EXPECT_EQ(info->dtype, DType::kF32);
  EXPECT_EQ(info->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(info->nbytes, 24u);
  info = r->Info("scalar");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->shape.empty());
  EXPECT_EQ(info->nbytes, 4u);
  EXPECT_EQ(info->numel(), 1);
  info = r->Info("empty");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->nbytes, 0u);
  EXPECT_EQ(info->numel(), 0);

  std::vector<float> f32b(6, -1.f);
  ASSERT_TRUE(r->ReadInto("w.f32", f32b.data(), DType::kF32, {2, 3}).ok());
  EXPECT_EQ(f32b, f32);
  std::vector<double> f64b(4);
  ASSERT_TRUE(r->ReadInto("w.f64", f64b.data(), DType::kF64, {4}).ok());
  EXPECT_EQ(f64b, f64);
  std::vector<int32_t> i32b(3);
  ASSERT_TRUE(r->ReadInto("w.i32", i32b.data(), DType::kI32, {3, 1}).ok());
  EXPECT_EQ(i32b, i32);
  std::vector<uint16_t> bf16b(5);
  ASSERT_TRUE(r->ReadInto("w.bf16", bf16b.data(), DType::kBF16, {5}).ok());
  EXPECT_EQ(bf16b, bf16);
  float scalar_b = 0.f;
  ASSERT_TRUE(r->ReadInto("scalar", &scalar_b, DType::kF32, {}).ok());
  EXPECT_EQ(scalar_b, 42.5f);
  EXPECT_TRUE(r->ReadInto("empty", nullptr, DType::kF32, {0, 4}).ok());

  // Tensor overload, and the reader survives a move.
  SafetensorsReader moved = std::move(*r);
  std::vector<float> viaTensor(6);
  Tensor t(viaTensor.data(), DType::kF32, {2, 3});
  ASSERT_TRUE(moved.ReadInto("w.f32", t).ok());
  EXPECT_EQ(viaTensor, f32);
  // BF16 stored -> F32 wanted widens exactly.
  std::vector<float> widened(5);
  ASSERT_TRUE(moved.ReadInto("w.bf16", widened.data(), DType::kF32, {5}).ok());
  EXPECT_EQ(widened[0], 1.0f);
  EXPECT_EQ(widened[1], -2.5f);
  EXPECT_TRUE(std::isinf(widened[2]));
  EXPECT_EQ(widened[4], 0.0f);
  EXPECT_TRUE(std::signbit(widened[4]));
}

TEST_F(SafetensorsTest, ExactBytesOfTinyFile) {
  float a = 1.5f;
  int32_t b[2] = {1, 2};
  // Given out of order: the file must sort by name.
  std::vector<SafetensorsEntry> entries = {{"b", DType::kI32, {2}, b}, {"a", DType::kF32, {}, &a}};
  const std::string p = Path("tiny.safetensors");
  ASSERT_TRUE(WriteSafetensors(p, entries, {}).ok());
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})";
  ASSERT_EQ(json.size(), 138u);
  std::string expected("\x90\0\0\0\0\0\0\0", 8);  // 144 = 138 + 6 spaces of padding
  expected += json + std::string(6, ' ');
  expected += std::string("\x00\x00\xc0\x3f", 4);  // 1.5f
  expected += std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8);
  EXPECT_EQ(ReadAll(p), expected);
}

TEST_F(SafetensorsTest, PythonStdlibParsesOurFile) {
  // scripts/setup.sh installs python3: without it this check fails, not skips.
  ASSERT_EQ(system("python3 -c 'import json, struct' >/dev/null 2>&1"), 0)
      << "python3 cannot run: install Debian's python3 (bash scripts/setup.sh)";
  std::vector<float> w = {0.5f, -1.25f, 3.f, 8.f};
  std::vector<int32_t> ids = {7, -9, 11};
  std::vector<double> d = {2.0, -0.125};
  const std::string p = Path("py.safetensors");
  ASSERT_TRUE(WriteSafetensors(p,
                               {{"model.w", DType::kF32, {2, 2}, w.data()},
                                {"ids", DType::kI32, {3}, ids.data()},
                                {"d", DType::kF64, {2}, d.data()}},
                               {{"k", "v"}})
                  .ok());
  const std::string script = Path("check.py");
  std::ofstream(script) << R"PY(
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', b[:8])
assert n % 8 == 0, n
h = json.loads(b[8:8 + n].decode('utf-8'))
assert h['__metadata__'] == {'format': 'pt', 'k': 'v'}, h['__metadata__']
data = b[8 + n:]
def get(name, fmt):
    e = h[name]
    s, t = e['data_offsets']
    return list(struct.unpack('<%d%s' % ((t - s) // struct.calcsize(fmt), fmt), data[s:t])), e
w, e = get('model.w', 'f'); assert w == [0.5, -1.25, 3.0, 8.0] and e['shape'] == [2, 2] and e['dtype'] == 'F32', e
i, e = get('ids', 'i'); assert i == [7, -9, 11] and e['dtype'] == 'I32', e
d, e = get('d', 'd'); assert d == [2.0, -0.125] and e['dtype'] == 'F64', e
ends = sorted(tuple(v['data_offsets']) for k, v in h.items() if k != '__metadata__')
assert ends[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ends, ends[1:])) and ends[-1][1] == len(data), ends
print('ok')
)PY";
  const std::string cmd = "python3 " + script + " " + p;
  EXPECT_EQ(system(cmd.c_str()), 0) << cmd;
}

TEST_F(SafetensorsTest, Bf16RoundToNearestEven) {
  EXPECT_EQ(F32ToBF16Bits(1.0f), 0x3F80);
  EXPECT_EQ(F32ToBF16Bits(1.0f + 0x1p-8f), 0x3F80);             // tie, even stays
  EXPECT_EQ(F32ToBF16Bits(1.0f + 3 * 0x1p-8f), 0x3F82);         // tie, odd rounds up
  EXPECT_EQ(F32ToBF16Bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);  // above the tie
  EXPECT_EQ(F32ToBF16Bits(-2.5f), 0xC020);
  EXPECT_EQ(F32ToBF16Bits(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(F32ToBF16Bits(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  const uint16_t nan = F32ToBF16Bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_EQ(BF16BitsToF32(0x3F82), 1.0f + 0x1p-6f);
}

TEST_F(SafetensorsTest, WritesF32SourceAsBf16) {
  // More elements than one 1 MiB staging chunk, so the chunk loop is exercised.
  const size_t n = 600000;
  std::vector<float> src(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<float>(i) * 0.001f - 7.f;
  src[0] = 1.0f + 0x1p-8f;
  src[1] = 1.0f + 3 * 0x1p-8f;
  SafetensorsEntry e{"x", DType::kBF16, {static_cast<int64_t>(n)}, src.data()};
  e.source_dtype = DType::kF32;
  const std::string p = Path("bf16.safetensors");
  ASSERT_TRUE(WriteSafetensors(p, {e}, {}).ok());
  absl::StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Info("x")->dtype_name, "BF16");
  EXPECT_EQ(r->Info("x")->nbytes, n * 2);
  absl::StatusOr<std::vector<uint8_t>> raw = r->ReadRaw("x");
  ASSERT_TRUE(raw.ok());
  ASSERT_EQ(raw->size(), n * 2);
  std::vector<uint16_t> bits(n);
  std::memcpy(bits.data(), raw->data(), n * 2);
  EXPECT_EQ(bits[0], 0x3F80);
  EXPECT_EQ(bits[1], 0x3F82);
  for (size_t i = 0; i < n; i += 9973) EXPECT_EQ(bits[i], F32ToBF16Bits(src[i])) << i;
  EXPECT_EQ(bits[n - 1], F32ToBF16Bits(src[n - 1]));
  // Read back as F32: the widened BF16 values.
  std::vector<float> back(n);
  ASSERT_TRUE(r->ReadInto("x", back.data(), DType::kF32, {static_cast<int64_t>(n)}).ok());
  for (size_t i = 0; i < n; i += 7919) EXPECT_EQ(back[i], BF16BitsToF32(bits[i])) << i;
  EXPECT_EQ(back[n - 1], BF16BitsToF32(bits[n - 1]));
}

TEST_F(SafetensorsTest, ReadConvertsF32FileToBf16AndF64) {
  std::vector<float> src = {1.0f + 3 * 0x1p-8f, -0.1f, 65504.f};
  const std::string p = Path("f32.safetensors");
  ASSERT_TRUE(WriteSafetensors(p, {{"x", DType::kF32, {3}, src.data()}}, {}).ok());
  absl::StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p);
  ASSERT_TRUE(r.ok());
  std::vector<uint16_t> b(3);
  ASSERT_TRUE(r->ReadInto("x", b.data(), DType::kBF16, {3}).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b[i], F32ToBF16Bits(src[i]));
  std::vector<double> d(3);
  ASSERT_TRUE(r->ReadInto("x", d.data(), DType::kF64, {3}).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d[i], static_cast<double>(src[i]));
}

TEST_F(SafetensorsTest, ReadsF16FromForeignFiles) {
  // F16 has no longctx dtype but is common in Hugging Face files: 1.0, -2.0,
  // 65504 (max), 2^-24 (smallest subnormal).
  const std::string hdr = R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})";
  const std::string p = MakeFile("f16.safetensors", hdr, 0);
  std::ofstream(p, std::ios::binary | std::ios::app)
      << std::string("\x00\x3c\x00\xc0\xff\x7b\x01\x00", 8);
  absl::StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Info("h")->dtype, std::nullopt);
  EXPECT_TRUE(r->metadata().empty());
  std::vector<float> f(4);
  ASSERT_TRUE(r->ReadInto("h", f.data(), DType::kF32, {4}).ok());
  EXPECT_EQ(f, (std::vector<float>{1.f, -2.f, 65504.f, 0x1p-24f}));
  absl::Status st = r->ReadInto("h", f.data(), DType::kI32, {4});
  EXPECT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "F16");
}

TEST_F(SafetensorsTest, ReadIntoMismatchesNameTensorExpectedAndActual) {
  std::vector<float> w(6, 1.f);
  const std::string p = Path("m.safetensors");
  ASSERT_TRUE(WriteSafetensors(p, {{"layer.w", DType::kF32, {2, 3}, w.data()}}, {}).ok());
  absl::StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p);
  ASSERT_TRUE(r.ok());
  std::vector<float> dst(6);
  absl::Status st = r->ReadInto("layer.w", dst.data(), DType::kF32, {3, 2});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_HAS(st.message(), "layer.w");
  EXPECT_HAS(st.message(), "[3, 2]");
  EXPECT_HAS(st.message(), "[2, 3]");
  EXPECT_HAS(st.message(), p);
  st = r->ReadInto("layer.w", dst.data(), DType::kI32, {2, 3});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_HAS(st.message(), "layer.w");
  EXPECT_HAS(st.message(), "I32");
  EXPECT_HAS(st.message(), "F32");
  st = r->ReadInto("nope", dst.data(), DType::kF32, {2, 3});
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_HAS(st.message(), "nope");
  EXPECT_FALSE(r->Info("nope").ok());
  EXPECT_FALSE(r->Has("nope"));
  EXPECT_TRUE(r->Has("layer.w"));
}

TEST_F(SafetensorsTest, TruncatedAfterOpenIsAnError) {
  std::vector<float> w(1000, 2.f);
  const std::string p = Path("t.safetensors");
  ASSERT_TRUE(WriteSafetensors(p, {{"w", DType::kF32, {1000}, w.data()}}, {}).ok());
  absl::StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(truncate(p.c_str(), 200), 0);
  absl::Status st = r->ReadInto("w", w.data(), DType::kF32, {1000});
  EXPECT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "end of file");
  EXPECT_HAS(st.message(), "'w'");
  // And re-opening the truncated file fails validation.
  EXPECT_FALSE(SafetensorsReader::Open(p).ok());
}

struct BadCase {
  const char* label;
  std::string header;  // length field matches unless len_override is set
  size_t data_bytes;
  const char* expect;  // substring of the message (besides the path)
  const char* tensor;  // tensor named in the message, or nullptr
  uint64_t len_override = 0;
};

TEST_F(SafetensorsTest, MalformedFilesAreRejectedWithClearErrors) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::vector<BadCase> cases = {
      {"header_too_large", "{}", 0, "exceeds the limit", nullptr, 200'000'000},
      {"header_longer_than_file", "{}", 0, "larger than", nullptr, 4096},
      {"invalid_json", R"({"a": {"dtype": "F32",)", 0, "not valid JSON", nullptr},
      {"not_an_object", "[1, 2]", 0, "start with '{'", nullptr},
      {"missing_dtype", R"({"w1":{"shape":[2],"data_offsets":[0,8]}})", 8, "missing \"dtype\"", "w1"},
      {"missing_shape", R"({"w2":{"dtype":"F32","data_offsets":[0,8]}})", 8, "missing \"shape\"", "w2"},
      {"missing_offsets", R"({"w3":{"dtype":"F32","shape":[2]}})", 8, "missing \"data_offsets\"", "w3"},
      {"unknown_dtype", R"({"w4":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype", "w4"},
      {"size_mismatch", R"({"w5":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "needs 12", "w5"},
      {"bf16_size_mismatch", R"({"w6":{"dtype":"BF16","shape":[2],"data_offsets":[0,8]}})", 8, "needs 4", "w6"},
      {"out_of_file", R"({"w7":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8, "past the end", "w7"},
      {"overlap", "{" + ok_entry + R"(,"w8":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12, "overlapping", "w8"},
      {"hole", "{" + ok_entry + R"(,"w9":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", 16, "hole", "w9"},
      {"hole_at_start", R"({"w10":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "hole", "w10"},
      {"trailing_bytes", "{" + ok_entry + "}", 12, "trailing bytes", nullptr},
      {"end_before_begin", R"({"w11":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8, "end before", "w11"},
      {"negative_dim", R"({"w12":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "non-negative", "w12"},
      {"float_dim", R"({"w13":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8, "non-negative", "w13"},
      {"offsets_arity", R"({"w14":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8, "pair", "w14"},
      {"entry_not_object", R"({"w15":[1]})", 0, "not an object", "w15"},
      {"dtype_not_string", R"({"w16":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4, "not a string", "w16"},
      {"duplicate_name", "{" + ok_entry + "," + ok_entry + "}", 8, "duplicate key 'a'", nullptr},
      {"metadata_not_string", R"({"__metadata__":{"format":1}})", 0, "not a string", nullptr},
      {"overflowing_shape", R"({"w17":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8, "overflows", "w17"},
  };
  for (const BadCase& c : cases) {
    const std::string name = std::string(c.label) + ".safetensors";
    const std::string p = c.len_override != 0 ? MakeFile(name, c.len_override, c.header, c.data_bytes)
                                              : MakeFile(name, c.header, c.data_bytes);
    absl::StatusOr<SafetensorsReader> r = SafetensorsReader::Open(p);
    ASSERT_FALSE(r.ok()) << c.label;
    const std::string msg(r.status().message());
    EXPECT_HAS(msg, p) << c.label;
    EXPECT_HAS(msg, c.expect) << c.label;
    if (c.tensor != nullptr) {
      EXPECT_HAS(msg, std::string("'") + c.tensor + "'") << c.label;
    }
  }

  // Shorter than the length field itself.
  const std::string shortp = Path("short.safetensors");
  std::ofstream(shortp, std::ios::binary) << "abc";
  absl::StatusOr<SafetensorsReader> r = SafetensorsReader::Open(shortp);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "shorter than the 8-byte");
  EXPECT_HAS(r.status().message(), shortp);

  // Missing file.
  r = SafetensorsReader::Open(Path("missing.safetensors"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_HAS(r.status().message(), "missing.safetensors");

  // The same shapes as the bad cases but well-formed: accepted (guards
  // against a validator that rejects everything). Empty tensors may sit
  // anywhere in the tiling, and the padding may be trailing spaces.
  const std::string good = MakeFile(
      "good.safetensors",
      "{" + ok_entry + R"(,"e":{"dtype":"I32","shape":[0,3],"data_offsets":[8,8]},"__metadata__":null}   )",
      8);
  r = SafetensorsReader::Open(good);
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST_F(SafetensorsTest, WriterRejectsBadEntries) {
  float x[2] = {1, 2};
  absl::Status st = WriteSafetensors(
      Path("dup.safetensors"), {{"a", DType::kF32, {2}, x}, {"a", DType::kF32, {1}, x}}, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_HAS(st.message(), "duplicate");
  st = WriteSafetensors(Path("meta.safetensors"), {{"__metadata__", DType::kF32, {2}, x}}, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  st = WriteSafetensors(Path("null.safetensors"), {{"n", DType::kF32, {2}, nullptr}}, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_HAS(st.message(), "'n'");
  SafetensorsEntry conv{"c", DType::kI32, {2}, x};
  conv.source_dtype = DType::kF32;
  st = WriteSafetensors(Path("conv.safetensors"), {conv}, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_HAS(st.message(), "conversion");
  // Validation happens before the file is created.
  EXPECT_FALSE(std::filesystem::exists(Path("dup.safetensors")));
  EXPECT_FALSE(std::filesystem::exists(Path("conv.safetensors")));
}

TEST_F(SafetensorsTest, FullDiskErrorNamesPathAndErrno) {
  struct stat st0;
  ASSERT_EQ(stat("/dev/full", &st0), 0) << "no /dev/full: every Linux system has it";
  std::vector<float> big(1 << 20, 1.f);
  absl::Status st =
      WriteSafetensors("/dev/full", {{"big", DType::kF32, {1 << 20}, big.data()}}, {});
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "/dev/full");
  EXPECT_HAS(st.message(), "No space left on device");
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  // The writer must never unlink a device node it could not fill.
  struct stat st1;
  ASSERT_EQ(stat("/dev/full", &st1), 0);
  EXPECT_TRUE(S_ISCHR(st1.st_mode));
  // A small file fails at flush time rather than in fwrite: same message.
  float one = 1.f;
  st = WriteSafetensors("/dev/full", {{"one", DType::kF32, {}, &one}}, {});
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "No space left on device");
}

// RLIMIT_FSIZE makes the kernel refuse writes past a size with EFBIG: a real
// partial file in a real directory, which the writer must remove.
TEST_F(SafetensorsTest, PartialFileRemovedWhenWriteFails) {
  std::vector<float> big(1 << 20, 3.f);
  std::vector<float> big2(1 << 18, 3.f);
  SafetensorsEntry conv{"conv", DType::kBF16, {1 << 18}, big2.data()};
  conv.source_dtype = DType::kF32;
  const std::string p = Path("partial.safetensors");
  const std::string p2 = Path("partial_conv.safetensors");
  absl::Status st, st2;
  {
    ::longctx::testing::FileSizeLimit limit(64 * 1024);
    ASSERT_TRUE(limit.ok());
    st = WriteSafetensors(p, {{"big", DType::kF32, {1 << 20}, big.data()}}, {});
    st2 = WriteSafetensors(p2, {conv}, {});
  }

  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), p);
  EXPECT_HAS(st.message(), "File too large");
  EXPECT_HAS(st.message(), "'big'");
  EXPECT_FALSE(std::filesystem::exists(p));
  ASSERT_FALSE(st2.ok());
  EXPECT_HAS(st2.message(), p2);
  EXPECT_FALSE(std::filesystem::exists(p2));
}

// Root (CI runs as root) passes directory permission checks only through the
// capabilities CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH. Clearing them from this
// thread's effective set (the permitted set keeps them) makes root obey the mode
// bits like any user until Restore(); capabilities are per thread
// in Linux and the writer opens its file on the calling thread.
class WithoutDacOverride {
 public:
  WithoutDacOverride() {
    header_.version = _LINUX_CAPABILITY_VERSION_3;
    header_.pid = 0;
    ok_ = syscall(SYS_capget, &header_, saved_) == 0;
    if (!ok_) return;
    __user_cap_data_struct dropped[2];
    std::memcpy(dropped, saved_, sizeof(saved_));
    dropped[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    ok_ = syscall(SYS_capset, &header_, dropped) == 0;
  }
  ~WithoutDacOverride() { Restore(); }
  bool ok() const { return ok_; }
  void Restore() {
    if (ok_) syscall(SYS_capset, &header_, saved_);
    ok_ = false;
  }

 private:
  __user_cap_header_struct header_{};
  __user_cap_data_struct saved_[2]{};
  bool ok_ = false;
};

TEST_F(SafetensorsTest, ReadOnlyDirectoryError) {
  const std::string ro = Path("ro");
  ASSERT_EQ(mkdir(ro.c_str(), 0555), 0);
  float x = 1.f;
  const std::string p = ro + "/w.safetensors";
  WithoutDacOverride no_override;
  ASSERT_TRUE(no_override.ok()) << "capget/capset: " << std::strerror(errno);
  absl::Status st = WriteSafetensors(p, {{"x", DType::kF32, {}, &x}}, {});
  no_override.Restore();
  chmod(ro.c_str(), 0755);
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), p);
  EXPECT_HAS(st.message(), "Permission denied");
  EXPECT_FALSE(std::filesystem::exists(p));
}

}  // namespace
}  // namespace longctx
