// Why: see packer.h. Everything a row contains is a pure function of
// (token file, options, rows emitted so far), which is what makes resuming
// from a checkpointed cursor exact.
#include "data/packer.h"
#include "data/splitmix64.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace longctx {
namespace {

constexpr uint64_t kEvalSalt = 0x6C6F6E6763747845ULL;     // "longctxE"
constexpr uint64_t kShuffleSalt = 0x6C6F6E6763747853ULL;  // "longctxS"
constexpr uint64_t kJoinSalt = 0x6C6F6E676374784AULL;     // "longctxJ"

std::vector<uint32_t> MakeOrder(const std::vector<uint32_t>& docs, uint64_t seed, uint64_t epoch,
                                bool shuffle) {
  std::vector<uint32_t> order = docs;
  if (!shuffle || order.size() < 2) return order;
  SplitMix64 rng(Mix64(seed ^ kShuffleSalt) ^ Mix64(epoch + 0x51ED270B27A4F3C1ULL));
  for (size_t i = order.size() - 1; i > 0; --i) {
    const size_t j = static_cast<size_t>(rng.Below(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

}  // namespace

const char* PackerSplitName(PackerSplit split) {
  switch (split) {
    case PackerSplit::kTrain: return "train";
    case PackerSplit::kEval: return "eval";
    case PackerSplit::kAll: return "all";
  }
  return "?";
}

bool DocumentInEvalSplit(int64_t doc_index, double eval_fraction) {
  const uint64_t h = Mix64(static_cast<uint64_t>(doc_index) ^ kEvalSalt);
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  return u < eval_fraction;
}

bool DocumentJoinsPrevious(uint64_t shuffle_seed, uint64_t epoch, uint64_t doc_in_epoch, double join_fraction) {
  if (!(join_fraction > 0.0)) return false;
  const uint64_t h = Mix64(Mix64(shuffle_seed ^ kJoinSalt) ^ Mix64(epoch + 0x51ED270B27A4F3C1ULL) ^ doc_in_epoch);
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  return u < join_fraction;
}

// ---------------------------------------------------------------------------
// Batch helpers

std::vector<std::pair<int32_t, int32_t>> SegmentsOfRow(const PackedBatch& batch, int row) {
  CHECK(row >= 0 && row < batch.batch_size) << "row " << row << " of " << batch.batch_size;
  const int32_t begin = row * batch.seq_len, end = begin + batch.seq_len;
  const std::vector<int32_t>& cu = batch.cu_seqlens;
  auto it = std::lower_bound(cu.begin(), cu.end(), begin);
  CHECK(it != cu.end() && *it == begin) << "row " << row << " start is not a segment boundary";
  std::vector<std::pair<int32_t, int32_t>> segs;
  for (; it + 1 != cu.end() && *it < end; ++it) segs.emplace_back(*it - begin, it[1] - it[0]);
  return segs;
}

std::vector<int32_t> SegmentLengths(const PackedBatch& batch) {
  std::vector<int32_t> lens;
  for (size_t i = 0; i + 1 < batch.cu_seqlens.size(); ++i) {
    lens.push_back(batch.cu_seqlens[i + 1] - batch.cu_seqlens[i]);
  }
  return lens;
}

absl::Status ValidatePackedBatch(const PackedBatch& b) {
  if (b.batch_size < 1 || b.seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed batch shape ", b.batch_size, " x ", b.seq_len));
  }
  const int64_t n = int64_t{b.batch_size} * b.seq_len;
  if (int64_t(b.inputs.size()) != n || int64_t(b.targets.size()) != n ||
      int64_t(b.positions.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packed batch arrays: inputs ", b.inputs.size(), ", targets ", b.targets.size(),
        ", positions ", b.positions.size(), ", expected ", n));
  }
  const std::vector<int32_t>& cu = b.cu_seqlens;
  if (cu.size() < 2 || cu.front() != 0 || cu.back() != n) {
    return absl::InvalidArgumentError("cu_seqlens must run from 0 to B*T");
  }
  int32_t max_len = 0;
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    if (cu[s + 1] <= cu[s]) {
      return absl::InvalidArgumentError(absl::StrCat("cu_seqlens not increasing at ", s));
    }
    if (cu[s] / b.seq_len != (cu[s + 1] - 1) / b.seq_len) {
      return absl::InvalidArgumentError(absl::StrCat("segment ", s, " [", cu[s], ", ", cu[s + 1],
                                                     ") crosses a row boundary"));
    }
    max_len = std::max(max_len, cu[s + 1] - cu[s]);
    for (int32_t t = cu[s]; t < cu[s + 1]; ++t) {
      if (b.positions[t] != t - cu[s]) {
        return absl::InvalidArgumentError(absl::StrCat("position ", b.positions[t], " at token ", t,
                                                       ", expected ", t - cu[s]));
      }
    }
  }
  if (max_len != b.max_seqlen) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_seqlen ", b.max_seqlen, ", longest segment ", max_len));
  }
  int64_t valid = 0;
  for (int32_t t : b.targets) {
    if (t < -1) return absl::InvalidArgumentError(absl::StrCat("target ", t));
    valid += t >= 0;
  }
  if (valid != b.num_target_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("num_target_tokens ", b.num_target_tokens,
                                                   ", counted ", valid));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Cursor JSON

nlohmann::json PackerCursorToJson(const PackerCursor& c) {
  return nlohmann::json{{"epoch", c.epoch},
                        {"doc_in_epoch", c.doc_in_epoch},
                        {"token_in_doc", c.token_in_doc},
                        {"rows_emitted", c.rows_emitted}};
}

absl::StatusOr<PackerCursor> PackerCursorFromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("packer cursor: expected a JSON object, got ",
                                                   j.dump()));
  }
  PackerCursor c;
  const std::pair<const char*, uint64_t*> fields[] = {{"epoch", &c.epoch},
                                                      {"doc_in_epoch", &c.doc_in_epoch},
                                                      {"token_in_doc", &c.token_in_doc},
                                                      {"rows_emitted", &c.rows_emitted}};
  for (const auto& [key, dst] : fields) {
    auto it = j.find(key);
    if (it == j.end()) {
      return absl::InvalidArgumentError(absl::StrCat("packer cursor: missing \"", key, "\" in ",
                                                     j.dump()));
    }
    if (it->is_number_unsigned()) {
      *dst = it->get<uint64_t>();
    } else if (it->is_number_integer() && it->get<int64_t>() >= 0) {
      *dst = static_cast<uint64_t>(it->get<int64_t>());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "packer cursor: \"", key, "\" must be a non-negative integer, got ", it->dump()));
    }
  }
  return c;
}

// ---------------------------------------------------------------------------
// Packer

absl::StatusOr<Packer> Packer::Create(const DocumentSource* reader, const PackerOptions& options) {
  if (reader == nullptr) return absl::InvalidArgumentError("Packer: null token file reader");
  if (options.seq_len < 1 || options.batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("Packer: seq_len ", options.seq_len,
                                                   " and batch_size ", options.batch_size,
                                                   " must be >= 1"));
  }
  if (int64_t{options.seq_len} * options.batch_size > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("Packer: batch_size * seq_len = ",
                                                   int64_t{options.seq_len} * options.batch_size,
                                                   " does not fit int32 cu_seqlens"));
  }
  if (!(options.eval_fraction >= 0.0 && options.eval_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Packer: eval_fraction ", options.eval_fraction, " not in [0, 1]"));
  }
  if (!(options.join_fraction >= 0.0 && options.join_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Packer: join_fraction ", options.join_fraction, " not in [0, 1]"));
  }
  if (options.join_fraction > 0.0 && !options.document_mask) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Packer: join_fraction ", options.join_fraction,
        " needs document_mask (without it every row is already one segment)"));
  }
  if (reader->n_docs() > int64_t{std::numeric_limits<uint32_t>::max()}) {
    return absl::InvalidArgumentError(absl::StrCat("Packer: ", reader->source_name(), " has ",
                                                   reader->n_docs(),
                                                   " documents; at most 2^32-1 supported"));
  }
  Packer p;
  p.reader_ = reader;
  p.options_ = options;
  for (int64_t i = 0; i < reader->n_docs(); ++i) {
    if (reader->doc_length(i) == 0) continue;
    const bool eval = DocumentInEvalSplit(i, options.eval_fraction);
    const bool keep = options.split == PackerSplit::kAll ||
                      (options.split == PackerSplit::kEval) == eval;
    if (!keep) continue;
    p.docs_.push_back(static_cast<uint32_t>(i));
    p.tokens_per_epoch_ += reader->doc_length(i);
  }
  if (p.docs_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Packer: the ", PackerSplitName(options.split), " split of ", reader->source_name(), " (",
        reader->n_docs(), " documents, eval_fraction ", options.eval_fraction,
        ") has no non-empty document"));
  }
  p.row_tokens_.resize(static_cast<size_t>(options.seq_len) + 1);
  p.row_starts_.resize(static_cast<size_t>(options.seq_len) + 1);
  return p;
}

std::vector<uint32_t> Packer::EpochOrder(uint64_t epoch) const {
  return MakeOrder(docs_, options_.shuffle_seed, epoch, options_.shuffle);
}

const std::vector<uint32_t>& Packer::Order(uint64_t epoch) {
  for (auto& [e, order] : order_cache_) {
    if (e == epoch) return order;
  }
  if (order_cache_.size() >= 2) {
    auto oldest = std::min_element(order_cache_.begin(), order_cache_.end(),
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
    order_cache_.erase(oldest);
  }
  order_cache_.emplace_back(epoch, EpochOrder(epoch));
  return order_cache_.back().second;
}

void Packer::ReadStream(StreamPos* pos, int64_t n, int32_t* out, uint8_t* doc_start) {
  int64_t filled = 0;
  while (filled < n) {
    const uint32_t doc = Order(pos->epoch)[pos->doc_in_epoch];
    const int64_t len = reader_->doc_length(doc);
    const int64_t take = std::min<int64_t>(len - static_cast<int64_t>(pos->token_in_doc), n - filled);
    reader_->ReadTokens(doc, static_cast<int64_t>(pos->token_in_doc), take, out + filled);
    std::fill(doc_start + filled, doc_start + filled + take, uint8_t{0});
    if (pos->token_in_doc == 0) {
      doc_start[filled] = DocumentJoinsPrevious(options_.shuffle_seed, pos->epoch, pos->doc_in_epoch,
                                                options_.join_fraction)
                              ? 2
                              : 1;
    }
    filled += take;
    pos->token_in_doc += static_cast<uint64_t>(take);
    if (pos->token_in_doc == static_cast<uint64_t>(len)) {
      pos->token_in_doc = 0;
      if (++pos->doc_in_epoch == docs_.size()) {
        pos->doc_in_epoch = 0;
        ++pos->epoch;
      }
    }
  }
}

absl::StatusOr<PackedBatch> Packer::Next() {
  PackedBatch batch;
  absl::Status st = NextInto(&batch);
  if (!st.ok()) return st;
  return batch;
}

absl::Status Packer::NextInto(PackedBatch* batch) {
  const int32_t T = options_.seq_len, B = options_.batch_size;
  const bool mask = options_.document_mask;
  batch->batch_size = B;
  batch->seq_len = T;
  batch->inputs.resize(size_t(B) * T);
  batch->targets.resize(size_t(B) * T);
  batch->positions.resize(size_t(B) * T);
  batch->cu_seqlens.assign(1, 0);
  batch->max_seqlen = 0;
  batch->num_target_tokens = 0;
  int32_t* tok = row_tokens_.data();
  uint8_t* starts = row_starts_.data();
  for (int32_t b = 0; b < B; ++b) {
    StreamPos pos{cursor_.epoch, cursor_.doc_in_epoch, cursor_.token_in_doc};
    ReadStream(&pos, T, tok, starts);
    const StreamPos next_row = pos;  // the next row starts at this row's last target
    ReadStream(&pos, 1, tok + T, starts + T);

    const int32_t base = b * T;
    int32_t* in = batch->inputs.data() + base;
    int32_t* tg = batch->targets.data() + base;
    int32_t* ps = batch->positions.data() + base;
    int32_t seg_start = 0;
    for (int32_t t = 0; t < T; ++t) {
      if (mask && t > 0 && starts[t] == 1) {
        batch->cu_seqlens.push_back(base + t);
        batch->max_seqlen = std::max(batch->max_seqlen, t - seg_start);
        seg_start = t;
      }
      in[t] = tok[t];
      ps[t] = t - seg_start;
      tg[t] = (mask && starts[t + 1]) ? -1 : tok[t + 1];
      batch->num_target_tokens += tg[t] >= 0;
    }
    batch->cu_seqlens.push_back(base + T);
    batch->max_seqlen = std::max(batch->max_seqlen, T - seg_start);
    cursor_ = PackerCursor{next_row.epoch, next_row.doc_in_epoch, next_row.token_in_doc,
                           cursor_.rows_emitted + 1};
  }
  return absl::OkStatus();
}

absl::Status Packer::Seek(const PackerCursor& c) {
  auto mismatch = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packer cursor {epoch ", c.epoch, ", doc_in_epoch ", c.doc_in_epoch, ", token_in_doc ",
        c.token_in_doc, ", rows_emitted ", c.rows_emitted, "} does not fit the ",
        PackerSplitName(options_.split), " split of ", reader_->source_name(), " (seq_len ",
        options_.seq_len, "): ", why,
        " (was it saved with another token file, seq_len, seed or split?)"));
  };
  if (c.doc_in_epoch >= docs_.size()) {
    return mismatch(absl::StrCat("doc_in_epoch must be < ", docs_.size()));
  }
  const std::vector<uint32_t> order = EpochOrder(c.epoch);
  const uint64_t len = static_cast<uint64_t>(reader_->doc_length(order[c.doc_in_epoch]));
  if (c.token_in_doc >= len) {
    return mismatch(absl::StrCat("token_in_doc must be < the document's length ", len));
  }
  using u128 = unsigned __int128;
  u128 stream_pos = static_cast<u128>(c.epoch) * static_cast<uint64_t>(tokens_per_epoch_);
  for (uint64_t i = 0; i < c.doc_in_epoch; ++i) stream_pos += reader_->doc_length(order[i]);
  stream_pos += c.token_in_doc;
  const u128 expected = static_cast<u128>(c.rows_emitted) * static_cast<uint64_t>(options_.seq_len);
  if (stream_pos != expected) {
    return mismatch(absl::StrCat("it points at stream token ", static_cast<uint64_t>(stream_pos),
                                 " but rows_emitted * seq_len = ", static_cast<uint64_t>(expected)));
  }
  cursor_ = c;
  return absl::OkStatus();
}

}  // namespace longctx
