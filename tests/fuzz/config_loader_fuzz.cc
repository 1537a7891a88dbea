// Why: a TrainConfig file is the one input every command reads first; any
// text must come back as a parse or validation error naming a place, never a
// crash, and a config that validates must give a memory verdict without
// overflowing (train/setup/memory_check.h runs on it before anything is allocated).
#include <cstdint>
#include <string>

#include "model/config.h"
#include "tests/fuzz/fuzz_util.h"
#include "train/config_loader.h"
#include "train/setup/memory_check.h"

// Operand copies of the two kinds a backend reports (kernels/backend.h): F32
// operands copied to bf16 (BF16 ones read as they are), and every operand
// widened to fp32; the fuzz build links no backend to ask.
constexpr longctx::Bf16OperandCopies kBf16Copies{2, 0, 1, 64, true};
constexpr longctx::Bf16OperandCopies kF32Copies{4, 4, 1, 64, false};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A trailing "\n--" splits the input into the file and one override.
  const size_t cut = text.rfind("\n--");
  const std::string file = cut == std::string::npos ? text : text.substr(0, cut);
  const std::string path = longctx::fuzz::WriteScratch(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                                                       ".textproto");
  std::vector<std::string> overrides;
  if (cut != std::string::npos) overrides.push_back(text.substr(cut + 1));
  auto config = longctx::LoadTrainConfig(path, overrides);
  if (!config.ok()) return 0;
  auto dims = longctx::ResolveModelConfig(config->model());
  if (!dims.ok()) __builtin_trap();  // LoadTrainConfig validated it
  (void)longctx::CheckMemoryFits(*config, *dims, longctx::MemoryUse::kTraining, 2, 2, int64_t{8} << 30,
                                 kBf16Copies);
  (void)longctx::CheckMemoryFits(*config, *dims, longctx::MemoryUse::kTraining, 1, 1, int64_t{8} << 30,
                                 kF32Copies);
  (void)longctx::CheckMemoryFits(*config, *dims, longctx::MemoryUse::kInference, 1, 1, int64_t{8} << 30,
                                 longctx::Bf16OperandCopies{});
  (void)longctx::ToTextProto(*config, /*include_defaults=*/true);
  return 0;
}
