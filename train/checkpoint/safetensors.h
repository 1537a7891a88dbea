// Why: checkpoints and Hugging Face weights travel as safetensors, so longctx
// reads and writes that exact format itself (no Python, no Rust): an 8-byte
// little-endian u64 header length N, N bytes of JSON
//   {"__metadata__": {"format": "pt", ...}, "name": {"dtype": "F32",
//    "shape": [..], "data_offsets": [begin, end]}, ...}
// (offsets relative to the first byte after the header), then the raw
// little-endian tensor bytes, contiguous, with no holes and no overlaps.
//
// Writer conventions (match the reference `safetensors` writer where it
// matters to readers):
//  - compact JSON, "__metadata__" first, then the tensors sorted by name; the
//    data section stores them in that same order, back to back;
//  - the header is padded with spaces to a multiple of 8 bytes, so the data
//    section starts 8-byte aligned;
//  - "__metadata__" always carries "format": "pt" unless the caller sets
//    "format" (transformers refuses files without it); values are strings.
//  - data is streamed from the caller's buffers (F32 -> BF16 conversion goes
//    through a small fixed-size staging buffer), every write/flush/fsync/close
//    is checked, and a failed write removes the partial file.
//
// Reader: header parsed and validated strictly at Open (the same rules as the
// reference: header <= 100 MB, every entry has dtype/shape/data_offsets, byte
// size == numel * dtype size, entries tile the data section exactly and the
// data section ends at the end of the file). Tensor bytes are read on demand
// with pread; the file is never loaded whole.
#ifndef LONGCTX_TRAIN_SAFETENSORS_H_
#define LONGCTX_TRAIN_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/tensor.h"

namespace longctx {

// Largest header the reader accepts (the reference's MAX_HEADER_SIZE).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// The dtype string safetensors uses for a longctx dtype ("F32", "F64", "BF16", "I32").
const char* SafetensorsDTypeName(DType t);

// Round-to-nearest-even F32 -> BF16 (NaN stays a quiet NaN, sign kept), and
// the exact BF16 -> F32 widening. Bit patterns, little-endian host.
uint16_t F32ToBF16Bits(float f);
float BF16BitsToF32(uint16_t b);

struct SafetensorsEntry {
  std::string name;
  // The dtype stored in the file.
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // empty = 0-d scalar (1 element)
  // numel(shape) contiguous elements of source_dtype (or of dtype when
  // source_dtype is unset). May be null only when numel is 0.
  const void* data = nullptr;
  // When set and different from dtype, the writer converts while streaming.
  // Supported: F32 -> BF16 (round to nearest even), F32 -> F64, F64 -> F32,
  // BF16 -> F32. Anything else is InvalidArgument.
  std::optional<DType> source_dtype;

  // Entry describing a dense CPU tensor (stored in its own dtype).
  static SafetensorsEntry FromTensor(std::string name, const Tensor& t);
};

// Writes `entries` (sorted by name in the file) and `metadata` to `path`,
// replacing any existing file. Errors name the path (and the tensor where
// one is at fault) and carry the errno text; on failure the partial file is
// removed (only if it is a regular file: writing to /dev/full never unlinks
// the device). Duplicate names, the name "__metadata__", negative dims or a
// null data pointer for a non-empty tensor are InvalidArgument.
absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsEntry>& entries,
                              const std::map<std::string, std::string>& metadata);

struct SafetensorsTensorInfo {
  std::string dtype_name;      // as in the file: "F32", "BF16", "F16", "I64", ...
  std::optional<DType> dtype;  // nullopt for dtypes longctx has no enum for (F16, I64, ...)
  std::vector<int64_t> shape;
  uint64_t nbytes = 0;
  uint64_t file_offset = 0;  // absolute offset of the first byte in the file
  int64_t numel() const;
};

class SafetensorsReader {
 public:
  // Opens and validates. Errors name the file and, where one is at fault,
  // the tensor.
  static absl::StatusOr<SafetensorsReader> Open(const std::string& path);

  SafetensorsReader(SafetensorsReader&& other) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&& other) noexcept;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;
  ~SafetensorsReader();

  const std::string& path() const { return path_; }
  // Tensor names, sorted.
  std::vector<std::string> names() const;
  bool Has(const std::string& name) const { return tensors_.count(name) != 0; }
  // NotFound naming the tensor and the file when absent.
  absl::StatusOr<SafetensorsTensorInfo> Info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Bytes of the JSON header (N, padding included); data starts at 8 + N.
  uint64_t header_bytes() const { return header_len_; }

  // Reads tensor `name` into `dst` (numel(want_shape) elements of
  // want_dtype). The stored shape must equal want_shape exactly. The stored
  // dtype must equal want_dtype, or be one of the conversions
  // BF16 -> F32, F16 -> F32, F32 -> BF16 (round to nearest even),
  // F32 -> F64, F64 -> F32. Mismatches are InvalidArgument naming the tensor,
  // the expected and the actual dtype/shape.
  absl::Status ReadInto(const std::string& name, void* dst, DType want_dtype,
                        const std::vector<int64_t>& want_shape) const;
  // Same, into a contiguous CPU tensor (its dtype and shape are the wanted ones).
  absl::Status ReadInto(const std::string& name, const Tensor& dst) const;
  // The stored bytes as they are (any dtype).
  absl::StatusOr<std::vector<uint8_t>> ReadRaw(const std::string& name) const;
  // Elements [first, first + count) of F32 tensor `name` (flattened, row-major)
  // into dst: only those bytes are read (a checkpoint loader on a new world
  // reads the overlap of its range with a stored one). InvalidArgument naming
  // the tensor when it is not F32 or the range is outside it.
  absl::Status ReadElements(const std::string& name, int64_t first, int64_t count, float* dst) const;

 private:
  SafetensorsReader() = default;
  absl::Status PreadExact(void* dst, uint64_t n, uint64_t offset, const std::string& what) const;

  std::string path_;
  int fd_ = -1;
  uint64_t header_len_ = 0;
  std::map<std::string, SafetensorsTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_SAFETENSORS_H_
