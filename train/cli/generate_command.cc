// Why: `longctx generate` (commands.h) is the smallest end-to-end use of a
// checkpoint as a language model: the checkpoint is loaded exactly as eval and
// probe load it (train/setup/loaded_checkpoint.h), the prompt is encoded with the
// run's own tokenizer, and the continuation is decoded by the KV-cache engine
// (model/inference.h) with seeded sampling (model/sampling.h), optionally
// under STRING.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "data/make_tokenizer.h"
#include "data/tokenizer.h"
#include "model/inference.h"
#include "model/sampling.h"
#include "train/cli/commands.h"
#include "train/setup/loaded_checkpoint.h"
#include "train/string_config.h"

namespace longctx {
int RunGenerateCommand(const GenerateCommandArgs& a) {
  if (a.prompt.empty()) return FailCommand(absl::InvalidArgumentError("--prompt: give the text to continue"));
  if (a.max_new_tokens < 0)
    return FailCommand(
        absl::InvalidArgumentError(absl::StrCat("--max_new_tokens: must be >= 0 (got ", a.max_new_tokens, ")")));
  absl::Status st = ValidateSamplingOptions(a.sampling);
  if (!st.ok()) return FailCommand(absl::InvalidArgumentError(absl::StrCat("--", st.message())));

  absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpointForEval(a.checkpoint, "", CheckpointData::kSkip);
  if (!loaded.ok()) return FailCommand(loaded.status());
  const TrainConfig& config = loaded->config;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(config.data().tokenizer());
  if (!tok.ok())
    return FailCommand(absl::Status(
        tok.status().code(),
        absl::StrCat(a.checkpoint, ": data.tokenizer '", config.data().tokenizer(), "': ", tok.status().message())));
  const std::vector<int32_t> prompt = (*tok)->Encode(a.prompt);
  if (prompt.empty()) return FailCommand(absl::InvalidArgumentError("--prompt: encodes to no tokens"));

  absl::StatusOr<StringOptions> string = ResolveStringOptions(a.string, config);
  if (!string.ok()) return FailCommand(string.status());
  EngineOptions eo;
  eo.string = *string;
  absl::StatusOr<std::unique_ptr<InferenceEngine>> engine = InferenceEngine::Create(loaded->model.get(), eo);
  if (!engine.ok()) return FailCommand(engine.status());

  absl::StatusOr<std::vector<float>> logits = (*engine)->Prefill(prompt);
  if (!logits.ok())
    return FailCommand(absl::InvalidArgumentError(absl::StrCat("--prompt: ", logits.status().message())));
  Sampler sampler(a.sampling);
  const int32_t eos = (*tok)->eos_id();
  std::vector<int32_t> out;
  bool stopped_at_eos = false;
  for (int i = 0; i < a.max_new_tokens; ++i) {
    const int32_t next = sampler.Next(*logits);
    if (next == eos) {
      stopped_at_eos = true;
      break;
    }
    out.push_back(next);
    if (i + 1 == a.max_new_tokens) break;
    logits = (*engine)->Decode(next);
    if (!logits.ok()) return FailCommand(logits.status());
  }
  const std::string text = (*tok)->Decode(out);
  if (a.json) {
    nlohmann::json j = {{"checkpoint", a.checkpoint},
                        {"prompt_tokens", prompt.size()},
                        {"tokens", out},
                        {"text", text},
                        {"stopped_at_eos", stopped_at_eos},
                        {"temperature", a.sampling.temperature},
                        {"top_k", a.sampling.top_k},
                        {"seed", a.sampling.seed}};
    if (string->enabled)
      j["string"] = {{"s", string->s}, {"w", string->w}, {"rope_scale", string->rope_scale}};
    // Byte-level continuations need not be valid UTF-8: replace, never throw.
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);  // may hold NUL bytes
    std::fputc('\n', stdout);
  }
  return std::fflush(stdout) == 0 ? 0 : FailCommand(absl::DataLossError("error writing stdout"));
}

}  // namespace longctx
