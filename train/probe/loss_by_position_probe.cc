// Why: see loss_by_position_probe.h.
#include "train/probe/loss_by_position_probe.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longctx {
namespace {

// One forward over `docs` laid out as segments; their losses added to `out`.
absl::Status ForwardAndAdd(Transformer& model, DeviceBatch& device_batch,
                           const std::vector<std::vector<int32_t>>& docs, LossByPosition* out) {
  absl::StatusOr<PackedBatch> b = DocumentsAsSegments(docs);
  if (!b.ok()) return b.status();
  const int64_t n = b->seq_len;
  Backend* be = model.backend();
  const bool f64 = model.dtype() == DType::kF64;  // finite-difference test models
  DeviceBuffer buf(be, static_cast<size_t>(n) * (f64 ? 8 : 4));
  const Tensor losses(buf.data(), f64 ? DType::kF64 : DType::kF32, {n}, be->device());
  BatchTensors t = device_batch.Upload(*b);
  model.ForwardBackward(t, 0.0, /*backward=*/false, &losses);
  std::vector<double> host(n);
  if (f64) {
    be->CopyToHost(host.data(), losses);
  } else {
    std::vector<float> f(n);
    be->CopyToHost(f.data(), losses);
    std::copy(f.begin(), f.end(), host.begin());
  }
  return AddBatchLossesByPosition(*b, host, out);
}

}  // namespace

absl::Status ValidateLossByPositionSettings(const LossByPositionSettings& s, const std::string& prefix) {
  if (s.train_len < 1)
    return absl::InvalidArgumentError(absl::StrCat("loss by position: training length ", s.train_len, " < 1"));
  if (s.max_len < s.train_len)
    return absl::InvalidArgumentError(absl::StrCat(prefix, "max_len: ", s.max_len,
                                                   " is shorter than the training length ", s.train_len));
  if (s.max_docs < 1)
    return absl::InvalidArgumentError(absl::StrCat(prefix, "docs: must be >= 1 (got ", s.max_docs, ")"));
  if (s.tokens_per_forward < 1)
    return absl::InvalidArgumentError(absl::StrCat("loss by position: tokens per forward ", s.tokens_per_forward));
  return absl::OkStatus();
}

std::vector<uint32_t> LongDocuments(const DocumentSource& source, const std::vector<uint32_t>& docs,
                                    int64_t train_len, int max_docs) {
  std::vector<uint32_t> out;
  for (uint32_t d : docs) {
    if (static_cast<int>(out.size()) >= max_docs) break;
    if (source.doc_length(d) > train_len) out.push_back(d);
  }
  return out;
}

absl::StatusOr<LossByPosition> RunLossByPosition(Transformer& model, DeviceBatch& device_batch,
                                                 const DocumentSource& source, const std::vector<uint32_t>& docs,
                                                 const LossByPositionSettings& s) {
  if (absl::Status st = ValidateLossByPositionSettings(s, "loss_by_position_"); !st.ok()) return st;
  if (docs.empty())
    return absl::FailedPreconditionError(
        absl::StrCat("loss by position: no held-out document of ", source.source_name(), " is longer than ",
                     s.train_len, " tokens"));
  absl::StatusOr<LossByPosition> r = MakeLossByPositionBuckets(s.train_len, s.max_len);
  if (!r.ok()) return r.status();
  const int64_t vocab = model.dims().vocab;
  std::vector<std::vector<int32_t>> group;
  int64_t group_tokens = 0;
  for (uint32_t d : docs) {
    const int64_t n = std::min(source.doc_length(d), s.max_len + 1);
    if (n < 2) continue;
    std::vector<int32_t> tokens(n);
    source.ReadTokens(d, 0, n, tokens.data());
    for (int32_t id : tokens)
      if (id < 0 || id >= vocab)
        return absl::InvalidArgumentError(absl::StrCat("loss by position: document ", d, " of ",
                                                       source.source_name(), " has token ", id,
                                                       " outside the model's vocabulary of ", vocab));
    if (!group.empty() && group_tokens + n - 1 > s.tokens_per_forward) {
      if (absl::Status st = ForwardAndAdd(model, device_batch, group, &*r); !st.ok()) return st;
      group.clear();
      group_tokens = 0;
    }
    group_tokens += n - 1;
    group.push_back(std::move(tokens));
  }
  if (!group.empty())
    if (absl::Status st = ForwardAndAdd(model, device_batch, group, &*r); !st.ok()) return st;
  return r;
}

nlohmann::json LossByPositionEvent(const LossByPosition& r, int64_t step) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const PositionBucket& b : r.buckets) {
    const double m = b.mean();
    buckets.push_back({{"lo", b.lo},
                       {"hi", b.hi},
                       {"loss", std::isfinite(m) ? nlohmann::json(m) : nlohmann::json(nullptr)},
                       {"tokens", b.tokens},
                       {"docs", b.docs}});
  }
  return {{"kind", "loss_by_position"}, {"step", step},         {"train_len", r.train_len},
          {"max_len", r.max_len},       {"documents", r.documents}, {"buckets", std::move(buckets)}};
}

std::string LossByPositionSummary(const LossByPosition& r) {
  std::string s;
  for (const PositionBucket& b : r.buckets) {
    if (!s.empty()) s += " | ";
    const double m = b.mean();
    absl::StrAppend(&s, b.lo, "-", b.hi, " ", std::isfinite(m) ? absl::StrFormat("%.3f", m) : std::string("-"));
  }
  absl::StrAppend(&s, " (", r.documents, " docs)");
  return s;
}

}  // namespace longctx
