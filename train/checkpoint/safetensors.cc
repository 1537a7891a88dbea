// Why: see safetensors.h. The header is parsed with nlohmann::json; the data
// section is never read whole: writes stream the caller's buffers through
// stdio, reads pread straight into the destination (or through a small
// staging buffer when converting dtypes).
#include "train/checkpoint/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <set>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; longctx assumes a little-endian host");

namespace longctx {
namespace {

using json = nlohmann::json;

constexpr size_t kStagingBytes = 1 << 20;

std::string ErrnoText(int e) { return std::generic_category().message(e); }

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Bytes per element of every fixed-width dtype the reference knows. Sub-byte
// dtypes (F4, F6_*) are not supported and count as unknown.
std::optional<uint64_t> DTypeBytesByName(const std::string& s) {
  static const std::map<std::string, uint64_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},      {"I8", 1},      {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"F8_E8M0", 1}, {"I16", 2},  {"U16", 2},     {"F16", 2},     {"BF16", 2},
      {"I32", 4},  {"U32", 4},     {"F32", 4},     {"F64", 8},     {"I64", 8},
      {"U64", 8},  {"C64", 8}};
  auto it = kSizes.find(s);
  if (it == kSizes.end()) return std::nullopt;
  return it->second;
}

std::optional<DType> LongctxDType(const std::string& s) {
  if (s == "F32") return DType::kF32;
  if (s == "F64") return DType::kF64;
  if (s == "BF16") return DType::kBF16;
  if (s == "I32") return DType::kI32;
  return std::nullopt;
}

// numel of `shape`, false on a negative dim or overflow of int64.
bool CheckedNumel(const std::vector<int64_t>& shape, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

float F16BitsToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

// Converts n elements from `from` to `to`. Returns false when the pair is not
// a supported conversion.
bool ConvertElements(const void* src, const std::string& from, void* dst, DType to, size_t n) {
  if (from == "BF16" && to == DType::kF32) {
    auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = BF16BitsToF32(s[i]);
    return true;
  }
  if (from == "F16" && to == DType::kF32) {
    auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = F16BitsToF32(s[i]);
    return true;
  }
  if (from == "F32" && to == DType::kBF16) {
    auto* s = static_cast<const float*>(src);
    auto* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = F32ToBF16Bits(s[i]);
    return true;
  }
  if (from == "F32" && to == DType::kF64) {
    auto* s = static_cast<const float*>(src);
    auto* d = static_cast<double*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = s[i];
    return true;
  }
  if (from == "F64" && to == DType::kF32) {
    auto* s = static_cast<const double*>(src);
    auto* d = static_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]);
    return true;
  }
  return false;
}

std::string FileErr(const std::string& path, const std::string& what) {
  return absl::StrCat("safetensors file '", path, "': ", what);
}

// Everything a WriteSafetensors call keeps open; Fail() closes and unlinks.
class FileSink {
 public:
  explicit FileSink(std::string path) : path_(std::move(path)) {}
  ~FileSink() {
    if (f_ != nullptr) std::fclose(f_);
  }

  absl::Status Open() {
    f_ = std::fopen(path_.c_str(), "wb");
    if (f_ == nullptr) return Errno(errno, "cannot open for writing");
    struct stat st;
    if (fstat(fileno(f_), &st) == 0) regular_ = S_ISREG(st.st_mode);
    return absl::OkStatus();
  }

  absl::Status Write(const void* p, size_t n, const std::string& what) {
    if (n == 0) return absl::OkStatus();
    errno = 0;
    const size_t w = std::fwrite(p, 1, n, f_);
    if (w != n) return Errno(errno != 0 ? errno : EIO, absl::StrCat("write of ", what, " failed"));
    return absl::OkStatus();
  }

  absl::Status Finish() {
    errno = 0;
    if (std::fflush(f_) != 0) return Errno(errno != 0 ? errno : EIO, "fflush failed");
    // fsync only makes sense (and only succeeds) on regular files.
    if (regular_ && fsync(fileno(f_)) != 0) return Errno(errno, "fsync failed");
    FILE* f = f_;
    f_ = nullptr;
    errno = 0;
    if (std::fclose(f) != 0) return Errno(errno != 0 ? errno : EIO, "fclose failed");
    return absl::OkStatus();
  }

  // Closes and removes the partial file (regular files only).
  absl::Status Fail(absl::Status st) {
    if (f_ != nullptr) {
      std::fclose(f_);
      f_ = nullptr;
    }
    if (regular_) unlink(path_.c_str());
    return st;
  }

 private:
  absl::Status Errno(int e, const std::string& what) {
    return absl::Status(absl::ErrnoToStatusCode(e),
                        absl::StrCat("writing safetensors file '", path_, "': ", what, ": ",
                                     ErrnoText(e)));
  }

  std::string path_;
  FILE* f_ = nullptr;
  bool regular_ = false;
};

}  // namespace

const char* SafetensorsDTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF64: return "F64";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
  }
  return "?";
}

uint16_t F32ToBF16Bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float BF16BitsToF32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

SafetensorsEntry SafetensorsEntry::FromTensor(std::string name, const Tensor& t) {
  CHECK(t.device == Device::kCpu) << "SafetensorsEntry::FromTensor(" << name << "): not a CPU tensor";
  CHECK(t.contiguous()) << "SafetensorsEntry::FromTensor(" << name << "): not contiguous";
  SafetensorsEntry e;
  e.name = std::move(name);
  e.dtype = t.dtype;
  e.shape.assign(t.shape, t.shape + t.ndim);
  e.data = t.data;
  return e;
}

int64_t SafetensorsTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------
// Writer.

absl::Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                              const std::map<std::string, std::string>& metadata) {
  // Validate everything and build the header before touching the file.
  std::vector<const SafetensorsEntry*> sorted;
  sorted.reserve(entries.size());
  for (const auto& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->name < b->name; });

  auto bad = [&](const std::string& tensor, const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("writing safetensors file '", path, "': tensor '", tensor, "': ", what));
  };

  std::map<std::string, std::string> meta = metadata;
  if (meta.count("format") == 0) meta["format"] = "pt";

  std::string header;
  std::vector<uint64_t> nbytes(sorted.size());
  try {
    header = "{\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : meta) {
      if (!first) header += ',';
      first = false;
      header += json(k).dump();
      header += ':';
      header += json(v).dump();
    }
    header += '}';
    uint64_t offset = 0;
    for (size_t i = 0; i < sorted.size(); ++i) {
      const SafetensorsEntry& e = *sorted[i];
      if (e.name == "__metadata__") return bad(e.name, "reserved name");
      if (i > 0 && sorted[i - 1]->name == e.name) return bad(e.name, "duplicate tensor name");
      int64_t numel;
      if (!CheckedNumel(e.shape, &numel)) {
        return bad(e.name, absl::StrCat("invalid shape ", ShapeString(e.shape)));
      }
      const DType src = e.source_dtype.value_or(e.dtype);
      if (src != e.dtype && !(src == DType::kF32 && e.dtype == DType::kBF16) &&
          !(src == DType::kF32 && e.dtype == DType::kF64) &&
          !(src == DType::kF64 && e.dtype == DType::kF32) &&
          !(src == DType::kBF16 && e.dtype == DType::kF32)) {
        return bad(e.name, absl::StrCat("unsupported conversion ", SafetensorsDTypeName(src),
                                        " -> ", SafetensorsDTypeName(e.dtype)));
      }
      if (numel > 0 && e.data == nullptr) return bad(e.name, "null data for a non-empty tensor");
      uint64_t n;
      if (__builtin_mul_overflow(static_cast<uint64_t>(numel), DTypeSize(e.dtype), &n)) {
        return bad(e.name, "byte size overflows");
      }
      nbytes[i] = n;
      header += ',';
      header += json(e.name).dump();
      header += absl::StrCat(":{\"dtype\":\"", SafetensorsDTypeName(e.dtype), "\",\"shape\":[",
                             absl::StrJoin(e.shape, ","), "],\"data_offsets\":[", offset, ",",
                             offset + n, "]}");
      offset += n;
    }
    header += '}';
  } catch (const json::exception& ex) {  // invalid UTF-8 in a name or a metadata string
    return absl::InvalidArgumentError(
        absl::StrCat("writing safetensors file '", path, "': header is not valid UTF-8: ", ex.what()));
  }
  header.append((8 - header.size() % 8) % 8, ' ');

  FileSink sink(path);
  if (absl::Status st = sink.Open(); !st.ok()) return st;
  unsigned char len_bytes[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<unsigned char>(n >> (8 * i));
  if (absl::Status st = sink.Write(len_bytes, 8, "the header length"); !st.ok()) {
    return sink.Fail(st);
  }
  if (absl::Status st = sink.Write(header.data(), header.size(), "the header"); !st.ok()) {
    return sink.Fail(st);
  }
  std::vector<unsigned char> staging;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const SafetensorsEntry& e = *sorted[i];
    const std::string what = absl::StrCat("tensor '", e.name, "'");
    const DType src = e.source_dtype.value_or(e.dtype);
    if (src == e.dtype) {
      if (absl::Status st = sink.Write(e.data, nbytes[i], what); !st.ok()) return sink.Fail(st);
      continue;
    }
    const size_t out_size = DTypeSize(e.dtype);
    const size_t chunk = kStagingBytes / std::max(out_size, DTypeSize(src));
    staging.resize(chunk * out_size);
    const size_t total = nbytes[i] / out_size;
    const auto* in = static_cast<const unsigned char*>(e.data);
    for (size_t done = 0; done < total; done += chunk) {
      const size_t m = std::min(chunk, total - done);
      ConvertElements(in + done * DTypeSize(src), SafetensorsDTypeName(src), staging.data(),
                      e.dtype, m);
      if (absl::Status st = sink.Write(staging.data(), m * out_size, what); !st.ok()) {
        return sink.Fail(st);
      }
    }
  }
  if (absl::Status st = sink.Finish(); !st.ok()) return sink.Fail(st);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Reader.

SafetensorsReader::SafetensorsReader(SafetensorsReader&& other) noexcept { *this = std::move(other); }

SafetensorsReader& SafetensorsReader::operator=(SafetensorsReader&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    header_len_ = other.header_len_;
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) close(fd_);
}

absl::Status SafetensorsReader::PreadExact(void* dst, uint64_t n, uint64_t offset,
                                           const std::string& what) const {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
    const ssize_t r = pread(fd_, p, want, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      return absl::Status(absl::ErrnoToStatusCode(e),
                          FileErr(path_, absl::StrCat("reading ", what, " at offset ", offset,
                                                      " failed: ", ErrnoText(e))));
    }
    if (r == 0) {
      return absl::DataLossError(FileErr(
          path_, absl::StrCat("reading ", what, ": unexpected end of file at offset ", offset,
                              " (was the file truncated?)")));
    }
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsReader> SafetensorsReader::Open(const std::string& path) {
  SafetensorsReader r;
  r.path_ = path;
  r.fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (r.fd_ < 0) {
    const int e = errno;
    return absl::Status(absl::ErrnoToStatusCode(e),
                        FileErr(path, absl::StrCat("cannot open: ", ErrnoText(e))));
  }
  struct stat st;
  if (fstat(r.fd_, &st) != 0) {
    const int e = errno;
    return absl::Status(absl::ErrnoToStatusCode(e),
                        FileErr(path, absl::StrCat("fstat failed: ", ErrnoText(e))));
  }
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(FileErr(path, "not a regular file"));
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  auto corrupt = [&](const std::string& what) { return absl::DataLossError(FileErr(path, what)); };
  if (file_size < 8) {
    return corrupt(absl::StrCat("file is ", file_size,
                                " bytes, shorter than the 8-byte header length"));
  }
  unsigned char len_bytes[8];
  if (absl::Status s = r.PreadExact(len_bytes, 8, 0, "the header length"); !s.ok()) return s;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(len_bytes[i]) << (8 * i);
  if (n > kSafetensorsMaxHeaderBytes) {
    return corrupt(absl::StrCat("header length ", n, " exceeds the limit of ",
                                kSafetensorsMaxHeaderBytes, " bytes"));
  }
  if (n > file_size - 8) {
    return corrupt(absl::StrCat("header length ", n, " is larger than the ", file_size - 8,
                                " bytes after the length field"));
  }
  r.header_len_ = n;
  std::string header(n, '\0');
  if (absl::Status s = r.PreadExact(header.data(), n, 8, "the header"); !s.ok()) return s;
  if (n == 0 || header[0] != '{') return corrupt("header does not start with '{'");

  // Parse, rejecting duplicate keys at the top level (a reader would
  // otherwise silently pick one of two tensors of the same name).
  std::set<std::string> seen;
  std::string duplicate;
  json root;
  try {
    root = json::parse(header, [&](int depth, json::parse_event_t ev, json& parsed) {
      if (ev == json::parse_event_t::key && depth == 1) {
        std::string k = parsed.get<std::string>();
        if (!seen.insert(k).second && duplicate.empty()) duplicate = k;
      }
      return true;
    });
  } catch (const json::exception& ex) {
    return corrupt(absl::StrCat("header is not valid JSON: ", ex.what()));
  }
  if (!duplicate.empty()) return corrupt(absl::StrCat("duplicate key '", duplicate, "' in header"));
  if (!root.is_object()) return corrupt("header is not a JSON object");

  const uint64_t data_size = file_size - 8 - n;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (v.is_null()) continue;
      if (!v.is_object()) return corrupt("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          return corrupt(absl::StrCat("__metadata__ value of '", m.key(), "' is not a string"));
        }
        r.metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) {
      return corrupt(absl::StrCat("tensor '", name, "': ", what));
    };
    if (!v.is_object()) return bad("entry is not an object");
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      if (!v.contains(field)) return bad(absl::StrCat("missing \"", field, "\""));
    }
    SafetensorsTensorInfo info;
    if (!v["dtype"].is_string()) return bad("\"dtype\" is not a string");
    info.dtype_name = v["dtype"].get<std::string>();
    const std::optional<uint64_t> elem = DTypeBytesByName(info.dtype_name);
    if (!elem) return bad(absl::StrCat("unknown dtype \"", info.dtype_name, "\""));
    info.dtype = LongctxDType(info.dtype_name);
    const json& shape = v["shape"];
    if (!shape.is_array()) return bad("\"shape\" is not an array");
    for (const json& d : shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return bad(absl::StrCat("\"shape\" ", shape.dump(), " has an entry that is not a non-negative integer"));
      }
      info.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    }
    int64_t numel;
    uint64_t want_bytes;
    if (!CheckedNumel(info.shape, &numel) ||
        __builtin_mul_overflow(static_cast<uint64_t>(numel), *elem, &want_bytes)) {
      return bad(absl::StrCat("shape ", ShapeString(info.shape), " overflows"));
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned()) {
      return bad(absl::StrCat("\"data_offsets\" ", off.dump(),
                              " is not a pair of non-negative integers"));
    }
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (end < begin) return bad(absl::StrCat("data_offsets [", begin, ", ", end, "] end before they begin"));
    if (end - begin != want_bytes) {
      return bad(absl::StrCat("data_offsets [", begin, ", ", end, "] span ", end - begin,
                              " bytes but dtype ", info.dtype_name, " x shape ",
                              ShapeString(info.shape), " needs ", want_bytes));
    }
    if (end > data_size) {
      return bad(absl::StrCat("data_offsets [", begin, ", ", end, "] run past the end of the file (",
                              data_size, " data bytes)"));
    }
    info.nbytes = want_bytes;
    info.file_offset = 8 + n + begin;
    r.tensors_.emplace(name, std::move(info));
  }

  // The entries must tile the data section exactly: no holes, no overlaps,
  // no trailing bytes (the reference rejects all three).
  std::vector<std::pair<const std::string*, const SafetensorsTensorInfo*>> order;
  for (const auto& [name, info] : r.tensors_) order.emplace_back(&name, &info);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.second->file_offset != b.second->file_offset) {
      return a.second->file_offset < b.second->file_offset;
    }
    return a.second->nbytes < b.second->nbytes;  // empty tensors first at a shared offset
  });
  uint64_t pos = 0;
  const std::string* prev = nullptr;
  for (const auto& [name, info] : order) {
    const uint64_t begin = info->file_offset - 8 - n;
    if (begin > pos) {
      return corrupt(absl::StrCat("tensor '", *name, "': hole of ", begin - pos,
                                  " bytes before it (data bytes [", pos, ", ", begin,
                                  ") belong to no tensor)"));
    }
    if (begin < pos) {
      return corrupt(absl::StrCat("tensor '", *name, "': data_offsets begin at ", begin,
                                  ", overlapping ", prev ? "tensor '" + *prev + "'" : "",
                                  " which ends at ", pos));
    }
    pos = begin + info->nbytes;
    if (info->nbytes > 0) prev = name;
  }
  if (pos != data_size) {
    return corrupt(absl::StrCat(data_size - pos, " trailing bytes after the last tensor (data ends at ",
                                pos, ", file has ", data_size, " data bytes)"));
  }
  return r;
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) out.push_back(name);
  return out;
}

absl::StatusOr<SafetensorsTensorInfo> SafetensorsReader::Info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(FileErr(path_, absl::StrCat("no tensor '", name, "'")));
  return it->second;
}

absl::StatusOr<std::vector<uint8_t>> SafetensorsReader::ReadRaw(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(FileErr(path_, absl::StrCat("no tensor '", name, "'")));
  std::vector<uint8_t> out(it->second.nbytes);
  if (absl::Status s = PreadExact(out.data(), out.size(), it->second.file_offset,
                                  absl::StrCat("tensor '", name, "'"));
      !s.ok()) {
    return s;
  }
  return out;
}

absl::Status SafetensorsReader::ReadInto(const std::string& name, void* dst, DType want_dtype,
                                         const std::vector<int64_t>& want_shape) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(FileErr(path_, absl::StrCat("no tensor '", name, "'")));
  const SafetensorsTensorInfo& info = it->second;
  const std::string what = absl::StrCat("tensor '", name, "'");
  if (want_shape != info.shape) {
    return absl::InvalidArgumentError(
        FileErr(path_, absl::StrCat(what, ": shape mismatch: expected ", ShapeString(want_shape),
                                    ", file has ", ShapeString(info.shape))));
  }
  const std::string want_name = SafetensorsDTypeName(want_dtype);
  const bool same = info.dtype_name == want_name;
  const bool convertible = (info.dtype_name == "BF16" && want_dtype == DType::kF32) ||
                           (info.dtype_name == "F16" && want_dtype == DType::kF32) ||
                           (info.dtype_name == "F32" && want_dtype == DType::kBF16) ||
                           (info.dtype_name == "F32" && want_dtype == DType::kF64) ||
                           (info.dtype_name == "F64" && want_dtype == DType::kF32);
  if (!same && !convertible) {
    return absl::InvalidArgumentError(FileErr(
        path_, absl::StrCat(what, ": dtype mismatch: expected ", want_name, ", file has ",
                            info.dtype_name, " (no conversion from ", info.dtype_name, " to ",
                            want_name, ")")));
  }
  const int64_t numel = info.numel();
  if (numel == 0) return absl::OkStatus();
  if (dst == nullptr) {
    return absl::InvalidArgumentError(FileErr(path_, absl::StrCat(what, ": null destination")));
  }
  if (same) return PreadExact(dst, info.nbytes, info.file_offset, what);

  const uint64_t in_size = *DTypeBytesByName(info.dtype_name);
  const size_t out_size = DTypeSize(want_dtype);
  const uint64_t chunk = kStagingBytes / in_size;
  std::vector<unsigned char> staging(chunk * in_size);
  auto* out = static_cast<unsigned char*>(dst);
  for (uint64_t done = 0; done < static_cast<uint64_t>(numel); done += chunk) {
    const uint64_t m = std::min<uint64_t>(chunk, numel - done);
    if (absl::Status s = PreadExact(staging.data(), m * in_size, info.file_offset + done * in_size, what);
        !s.ok()) {
      return s;
    }
    ConvertElements(staging.data(), info.dtype_name, out + done * out_size, want_dtype, m);
  }
  return absl::OkStatus();
}

absl::Status SafetensorsReader::ReadInto(const std::string& name, const Tensor& dst) const {
  if (dst.device != Device::kCpu || !dst.contiguous()) {
    return absl::InvalidArgumentError(
        FileErr(path_, absl::StrCat("tensor '", name, "': destination must be a contiguous CPU tensor")));
  }
  return ReadInto(name, dst.data, dst.dtype, std::vector<int64_t>(dst.shape, dst.shape + dst.ndim));
}

absl::Status SafetensorsReader::ReadElements(const std::string& name, int64_t first, int64_t count,
                                             float* dst) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(FileErr(path_, absl::StrCat("no tensor '", name, "'")));
  const SafetensorsTensorInfo& info = it->second;
  const std::string what = absl::StrCat("tensor '", name, "'");
  if (info.dtype_name != "F32")
    return absl::InvalidArgumentError(
        FileErr(path_, absl::StrCat(what, ": element reads need F32, the file has ", info.dtype_name)));
  if (first < 0 || count < 0 || first > info.numel() || count > info.numel() - first)
    return absl::InvalidArgumentError(FileErr(path_, absl::StrCat(what, ": elements [", first, ", ", first + count,
                                                                  ") are outside its ", info.numel())));
  if (count == 0) return absl::OkStatus();
  if (dst == nullptr) return absl::InvalidArgumentError(FileErr(path_, absl::StrCat(what, ": null destination")));
  return PreadExact(dst, static_cast<uint64_t>(count) * sizeof(float),
                    info.file_offset + static_cast<uint64_t>(first) * sizeof(float), what);
}

}  // namespace longctx
