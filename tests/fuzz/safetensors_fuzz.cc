// Why: model.safetensors comes from other programs (Hugging Face exports, the
// conversion tools) and from disks that fill up; its JSON header declares
// dtypes, shapes and offsets the reader must check before it trusts them.
// Opens each input, then reads every tensor it accepted (raw, and as F32 when small).
#include <cstdint>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "train/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = longctx::fuzz::WriteScratch(data, size, ".safetensors");
  auto reader = longctx::SafetensorsReader::Open(path);
  if (!reader.ok()) return 0;
  for (const std::string& name : reader->names()) {
    auto info = reader->Info(name);
    if (!info.ok()) continue;
    auto raw = reader->ReadRaw(name);
    if (raw.ok() && raw->size() != info->nbytes) __builtin_trap();  // accepted, but a different size
    const int64_t n = info->numel();
    if (n >= 0 && n <= (1 << 16)) {
      std::vector<float> out(static_cast<size_t>(n));
      (void)reader->ReadInto(name, out.data(), longctx::DType::kF32, info->shape);
    }
  }
  return 0;
}
