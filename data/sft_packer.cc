// Why: see sft_packer.h.
#include "data/sft_packer.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "data/splitmix64.h"

namespace longctx {
namespace {

constexpr uint64_t kSftShuffleSalt = 0x5F7A3C1E9B2D4081ULL;

}  // namespace

nlohmann::json SftCursorToJson(const SftCursor& c) {
  return {{"epoch", c.epoch},
          {"example_in_epoch", c.example_in_epoch},
          {"token_in_example", c.token_in_example},
          {"rows_emitted", c.rows_emitted}};
}

absl::StatusOr<SftCursor> SftCursorFromJson(const nlohmann::json& j) {
  SftCursor c;
  if (!j.is_object()) return absl::InvalidArgumentError("SFT cursor: not a JSON object");
  for (auto [key, field] : {std::pair{"epoch", &c.epoch}, std::pair{"example_in_epoch", &c.example_in_epoch},
                            std::pair{"token_in_example", &c.token_in_example},
                            std::pair{"rows_emitted", &c.rows_emitted}}) {
    if (!j.contains(key) || !j[key].is_number_unsigned()) {
      return absl::InvalidArgumentError(absl::StrCat("SFT cursor: \"", key, "\" missing or not an unsigned integer"));
    }
    *field = j[key].get<uint64_t>();
  }
  if (j.size() != 4) return absl::InvalidArgumentError(absl::StrCat("SFT cursor: unknown keys in ", j.dump()));
  return c;
}

absl::StatusOr<SftPacker> SftPacker::Create(const SftDataset* data, const SftPackerOptions& options) {
  if (options.seq_len < 2 || options.batch_size < 1 ||
      static_cast<int64_t>(options.seq_len) * options.batch_size > 0x7fffffffLL) {
    return absl::InvalidArgumentError(absl::StrCat("SFT packer: seq_len ", options.seq_len, " × batch_size ",
                                                   options.batch_size, " (need seq_len >= 2, B·T < 2^31)"));
  }
  if (options.pad_id < 0 || options.pad_id >= data->vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("SFT packer: pad_id ", options.pad_id, " outside the vocabulary"));
  }
  SftPacker p;
  p.data_ = data;
  p.options_ = options;
  for (int64_t i = 0; i < data->n_examples(); ++i) {
    if (data->length(i) > options.seq_len) {
      if (options.long_examples == SftLongExamples::kSkip) continue;
      if (options.long_examples == SftLongExamples::kError) {
        return absl::InvalidArgumentError(absl::StrCat(
            "SFT example ", data->source(i), " has ", data->length(i), " tokens, longer than the ", options.seq_len,
            "-token rows (shorten it, use longer rows, or split long examples)"));
      }
    }
    p.examples_.push_back(static_cast<uint32_t>(i));
  }
  if (p.examples_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("SFT packer: no example of at most ", options.seq_len,
                                                   " tokens among the ", data->n_examples(), " examples"));
  }
  return p;
}

std::vector<uint32_t> SftPacker::EpochOrder(uint64_t epoch) const {
  std::vector<uint32_t> order = examples_;
  if (!options_.shuffle || order.size() < 2) return order;
  SplitMix64 rng(Mix64(options_.shuffle_seed ^ kSftShuffleSalt) ^ Mix64(epoch + 0x51ED270B27A4F3C1ULL));
  for (size_t i = order.size() - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(rng.Below(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

const std::vector<uint32_t>& SftPacker::Order(uint64_t epoch) {
  if (cached_epoch_ != epoch) {
    cached_order_ = EpochOrder(epoch);
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

void SftPacker::FillRow(int32_t* in, int32_t* tgt, int32_t* pos, std::vector<int32_t>* seg_lens) {
  const int32_t T = options_.seq_len;
  int32_t p = 0;
  while (p < T) {
    const uint32_t ex = Order(cursor_.epoch)[cursor_.example_in_epoch];
    const int64_t len = data_->length(ex);
    const int64_t rem = len - static_cast<int64_t>(cursor_.token_in_example);
    int64_t take;
    if (rem <= T - p) {
      take = rem;
    } else if (p == 0) {
      take = T;  // only a split example gets here: its next chunk fills the row
    } else {
      break;  // the example starts the next row
    }
    const absl::Span<const int32_t> toks = data_->tokens(ex);
    const absl::Span<const uint8_t> loss = data_->loss(ex);
    const int64_t first = static_cast<int64_t>(cursor_.token_in_example);
    for (int64_t k = 0; k < take; ++k) {
      const int64_t j = first + k;
      in[p + k] = toks[j];
      pos[p + k] = static_cast<int32_t>(k);
      tgt[p + k] = (j + 1 < len && loss[j + 1] != 0) ? toks[j + 1] : -1;
    }
    seg_lens->push_back(static_cast<int32_t>(take));
    p += static_cast<int32_t>(take);
    if (first + take == len) {
      cursor_.token_in_example = 0;
      if (++cursor_.example_in_epoch == examples_.size()) {
        cursor_.example_in_epoch = 0;
        ++cursor_.epoch;
      }
    } else {
      cursor_.token_in_example = static_cast<uint64_t>(first + take);
    }
  }
  if (p < T) {
    for (int32_t k = p; k < T; ++k) {
      in[k] = options_.pad_id;
      tgt[k] = -1;
      pos[k] = k - p;
    }
    seg_lens->push_back(T - p);
  }
  ++cursor_.rows_emitted;
}

absl::Status SftPacker::NextInto(PackedBatch* b) {
  const int32_t B = options_.batch_size, T = options_.seq_len;
  b->batch_size = B;
  b->seq_len = T;
  const size_t n = static_cast<size_t>(B) * T;
  b->inputs.resize(n);
  b->targets.resize(n);
  b->positions.resize(n);
  b->cu_seqlens.assign(1, 0);
  b->max_seqlen = 0;
  std::vector<int32_t> segs;
  for (int32_t r = 0; r < B; ++r) {
    segs.clear();
    const size_t off = static_cast<size_t>(r) * T;
    FillRow(b->inputs.data() + off, b->targets.data() + off, b->positions.data() + off, &segs);
    for (int32_t s : segs) {
      b->cu_seqlens.push_back(b->cu_seqlens.back() + s);
      b->max_seqlen = std::max(b->max_seqlen, s);
    }
  }
  b->num_target_tokens = std::count_if(b->targets.begin(), b->targets.end(), [](int32_t t) { return t >= 0; });
  return absl::OkStatus();
}

absl::StatusOr<PackedBatch> SftPacker::Next() {
  PackedBatch b;
  absl::Status st = NextInto(&b);
  if (!st.ok()) return st;
  return b;
}

absl::Status SftPacker::Seek(const SftCursor& c) {
  if (c.example_in_epoch >= examples_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("SFT cursor: example_in_epoch ", c.example_in_epoch,
                                                   " but this packer takes ", examples_.size(), " examples"));
  }
  const uint32_t ex = EpochOrder(c.epoch)[c.example_in_epoch];
  if (c.token_in_example >= static_cast<uint64_t>(data_->length(ex)) ||
      (c.token_in_example > 0 && (options_.long_examples != SftLongExamples::kSplit ||
                                  c.token_in_example % static_cast<uint64_t>(options_.seq_len) != 0))) {
    return absl::InvalidArgumentError(absl::StrCat("SFT cursor: token_in_example ", c.token_in_example,
                                                   " is not a chunk start of example ", data_->source(ex)));
  }
  cursor_ = c;
  return absl::OkStatus();
}

std::string DumpPackedBatch(const PackedBatch& batch,
                            const std::function<std::string(const std::vector<int32_t>&)>& decode, int max_rows) {
  std::string out;
  const int32_t T = batch.seq_len;
  for (size_t s = 0; s + 1 < batch.cu_seqlens.size(); ++s) {
    const int32_t a = batch.cu_seqlens[s], e = batch.cu_seqlens[s + 1];
    const int32_t row = a / T;
    if (row >= max_rows) break;
    absl::StrAppend(&out, "row ", row, " seg ", s, " [", a - row * T, ", ", e - row * T, "): ");
    std::vector<int32_t> run;
    bool run_loss = false;
    auto flush = [&]() {
      if (run.empty()) return;
      const std::string text = decode(run);
      absl::StrAppend(&out, run_loss ? "⟦" : "", text, run_loss ? "⟧" : "");
      run.clear();
    };
    for (int32_t i = a; i < e; ++i) {
      const bool loss = i > a && batch.targets[i - 1] >= 0;
      if (loss != run_loss) {
        flush();
        run_loss = loss;
      }
      run.push_back(batch.inputs[i]);
    }
    flush();
    // A chunk's last target may be the first token of the next chunk of a split example.
    if (batch.targets[e - 1] >= 0) absl::StrAppend(&out, "⟦→", decode({batch.targets[e - 1]}), "⟧");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace longctx
