// Why: see inference.h. One Step runs a block of tokens through every layer:
// the block code shared with Transformer, keys/values appended to the cache,
// attention of the block's queries against the cached key segment.
#include "model/inference.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "model/block_forward.h"

namespace longctx {
namespace {

// Regions of the step scratch, each `rows` (or 1 for the last-row logits)
// times a per-row width.
enum Region {
  kX, kXn, kRstd, kQkv, kO, kLse, kXmid, kXn2, kRstd2, kGu, kH,
  kQraw, kKraw, kQrstd, kKrstd, kQkTmp, kXf, kRstdf, kLogits, kCapQ, kCapK, kNumRegions
};

const char* KindName(AttentionKind k) {
  switch (k) {
    case ROPE_FULL: return "rope_full";
    case ROPE_SWA: return "rope_swa";
    case NOPE_FULL: return "nope_full";
    default: return "unknown";
  }
}

}  // namespace

struct InferenceEngine::Scratch {
  int64_t rows = 0;
  bool all_logits = false;
  DeviceBuffer arena;
  size_t offset[kNumRegions] = {};
  std::vector<int32_t> ids, positions, cu_q, cu_k;  // host index tensors of the step
};

absl::StatusOr<std::unique_ptr<InferenceEngine>> InferenceEngine::Create(Transformer* model,
                                                                         const EngineOptions& options) {
  if (model == nullptr) return absl::InvalidArgumentError("InferenceEngine: no model");
  absl::Status st = ValidateStringOptions(options.string);
  if (!st.ok()) return st;
  if (options.prefill_chunk < 0)
    return absl::InvalidArgumentError(absl::StrCat("prefill_chunk: must be >= 0 (got ", options.prefill_chunk, ")"));
  const ModelDims& d = model->dims();
  for (const auto& [layer, head] : options.ablate_heads)
    if (layer < 0 || layer >= d.layers || head < 0 || head >= d.heads)
      return absl::InvalidArgumentError(absl::StrCat("ablate_heads: ", layer, ":", head, " is outside the model's ",
                                                     d.layers, " layers x ", d.heads, " heads"));
  return std::unique_ptr<InferenceEngine>(new InferenceEngine(model, options));
}

InferenceEngine::~InferenceEngine() = default;

InferenceEngine::InferenceEngine(Transformer* model, const EngineOptions& options)
    : model_(model),
      dims_(model->dims()),
      be_(model->backend()),
      dtype_(model->dtype()),
      options_(options),
      cache_(model->dims(), model->backend(), model->dtype()),
      attention_(model->backend(), model->dtype()),
      s_(std::make_unique<Scratch>()) {}

void InferenceEngine::Reset() {
  cache_.Reset();
  position_ = 0;
}

absl::Status InferenceEngine::CheckTokens(absl::Span<const int32_t> tokens) const {
  if (tokens.empty()) return absl::InvalidArgumentError("inference: no tokens to run");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= dims_.vocab)
      return absl::InvalidArgumentError(absl::StrCat("inference: token ", i, " is id ", tokens[i],
                                                     ", outside the vocabulary [0, ", dims_.vocab, ")"));
  if (position_ + static_cast<int64_t>(tokens.size()) > INT32_MAX)
    return absl::InvalidArgumentError("inference: the sequence would exceed 2^31 - 1 positions");
  return absl::OkStatus();
}

void InferenceEngine::EnsureScratch(int64_t rows, bool all_logits) {
  Scratch& s = *s_;
  if (rows <= s.rows && (!all_logits || s.all_logits)) return;
  rows = std::max(rows, s.rows);
  all_logits = all_logits || s.all_logits;
  const int64_t D = dims_.hidden, H = dims_.heads, Hkv = dims_.kv_heads, F = dims_.ffn, V = dims_.vocab;
  const int64_t qd = dims_.q_dim(), kvd = dims_.kv_dim();
  const int64_t width[kNumRegions] = {D, D, 1, dims_.qkv_dim(), qd, H, D, D, 1, 2 * F, F,
                                      qd, kvd, H, Hkv, qd, D, 1, V, qd, kvd};
  size_t cursor = 0;
  for (int r = 0; r < kNumRegions; ++r) {
    s.offset[r] = cursor;
    const int64_t n = (r == kLogits && !all_logits) ? 1 : rows;
    cursor += (static_cast<size_t>(n * width[r]) * DTypeSize(dtype_) + 63) / 64 * 64;
  }
  s.arena = DeviceBuffer(be_, cursor);
  s.rows = rows;
  s.all_logits = all_logits;
}

void InferenceEngine::CaptureLayer(int layer, const Tensor& q, const Tensor& k, int64_t rows) {
  Scratch& s = *s_;
  char* base = static_cast<char*>(s.arena.data());
  const int64_t qd = dims_.q_dim(), kvd = dims_.kv_dim();
  const Tensor dq(base + s.offset[kCapQ], dtype_, {rows, dims_.heads, dims_.head_dim}, be_->device());
  const Tensor dk(base + s.offset[kCapK], dtype_, {rows, dims_.kv_heads, dims_.head_dim}, be_->device());
  be_->Copy(dq, q);
  be_->Copy(dk, k);
  CapturedAttention& c = captured_[layer];
  auto append = [&](const Tensor& t, int64_t width, std::vector<float>* out) {
    const size_t old = out->size();
    out->resize(old + rows * width);
    if (dtype_ == DType::kF32) {
      be_->CopyToHost(out->data() + old, t);
    } else {
      std::vector<double> host(rows * width);
      be_->CopyToHost(host.data(), t);
      std::copy(host.begin(), host.end(), out->begin() + old);
    }
  };
  append(dq, qd, &c.q);
  append(dk, kvd, &c.k);
  c.tokens += rows;
}

void InferenceEngine::Step(absl::Span<const int32_t> tokens, bool every_row, float* logits_out) {
  const int64_t c = static_cast<int64_t>(tokens.size());
  EnsureScratch(c, every_row);
  Scratch& s = *s_;
  Backend& be = *be_;
  const Device dev = be.device();
  const int64_t D = dims_.hidden, H = dims_.heads, Hkv = dims_.kv_heads, hd = dims_.head_dim, V = dims_.vocab;
  char* base = static_cast<char*>(s.arena.data());
  auto view = [&](Region r, std::initializer_list<int64_t> shape) { return Tensor(base + s.offset[r], dtype_, shape, dev); };

  s.ids.assign(tokens.begin(), tokens.end());
  s.positions.resize(c);
  for (int64_t t = 0; t < c; ++t) s.positions[t] = static_cast<int32_t>(position_ + t);
  // Host index tensors: the CPU backend reads them in place, a device backend stages them.
  const Tensor ids(s.ids.data(), DType::kI32, {c}, Device::kCpu);
  const Tensor positions(s.positions.data(), DType::kI32, {c}, Device::kCpu);
  s.cu_q = {0, static_cast<int32_t>(c)};
  s.cu_k = {0, 0};
  const Tensor cu_q(s.cu_q.data(), DType::kI32, {2}, Device::kCpu);
  const Tensor cu_k(s.cu_k.data(), DType::kI32, {2}, Device::kCpu);

  const Tensor x = view(kX, {c, D}), xn = view(kXn, {c, D}), rstd = view(kRstd, {c}),
               qkv = view(kQkv, {c, dims_.qkv_dim()}), o = view(kO, {c, H, hd}), lse = view(kLse, {H, c}),
               xmid = view(kXmid, {c, D}), xn2 = view(kXn2, {c, D}), rstd2 = view(kRstd2, {c}),
               gu = view(kGu, {c, 2 * dims_.ffn}), h = view(kH, {c, dims_.ffn});
  QkNormTensors qk;
  if (dims_.qk_norm)
    qk = {view(kQraw, {c, dims_.q_dim()}), view(kKraw, {c, dims_.kv_dim()}), view(kQrstd, {c * H}),
          view(kKrstd, {c * Hkv}), view(kQkTmp, {c, dims_.q_dim()})};

  const ParamStore& params = model_->params();
  const ParamLayout& layout = model_->layout();
  EmbeddingParams emb;
  emb.ids = ids;
  emb.table = params.at(0, layout.embedding_offset(), {V, D});
  emb.out = x;
  be.EmbeddingForward(emb);

  for (int l = 0; l < dims_.layers; ++l) {
    const LayerParams w = LayerParamsOf(params, dims_, l);
    AttentionInputForward(be, dims_, w, x, xn, rstd, qkv, qk);
    const Tensor q = HeadsView(qkv, 0, H, hd), k = HeadsView(qkv, H * hd, Hkv, hd),
                 v = HeadsView(qkv, (H + Hkv) * hd, Hkv, hd);
    RotateKeysValues(be, dims_, l, options_.string, k, v, positions);
    const KvCache::Rows rows = cache_.Append(l, c);
    be.Copy(rows.k, k);
    be.Copy(rows.v, v);
    s.cu_k[1] = static_cast<int32_t>(cache_.length(l));

    LayerAttentionArgs at;
    at.dims = &dims_;
    at.layer = l;
    at.q = q;
    at.k = cache_.keys(l);
    at.v = cache_.values(l);
    at.q_positions = positions;
    at.q_positions_host = s.positions.data();
    at.cu_seqlens = cu_q;
    at.cu_seqlens_k = cu_k;
    at.o = o;
    at.lse = lse;
    at.string = options_.string;
    attention_.Forward(at);
    if (!captured_.empty()) CaptureLayer(l, q, k, c);  // during a Prefill with a hook
    for (const auto& [layer, head] : options_.ablate_heads) {
      if (layer != l) continue;
      Tensor oh(static_cast<char*>(o.data) + head * hd * DTypeSize(dtype_), dtype_, {c, hd}, dev);
      oh.row_stride = o.stride0();
      be.Fill(oh, 0.0);
    }

    AttentionOutputMlpForward(be, dims_, w, x, o.Reshape({c, H * hd}), xmid, xn2, rstd2, gu, h, x);
  }

  // Final norm and LM head on the rows whose logits are wanted.
  const int64_t first = every_row ? 0 : c - 1, m = c - first;
  const Tensor xf = view(kXf, {m, D}), rstdf = view(kRstdf, {m}), logits = view(kLogits, {m, V});
  RmsNormParams fn;
  fn.x = x.Rows(first, c);
  fn.weight = params.at(0, layout.final_norm_offset(), {D});
  fn.y = xf;
  fn.rstd = rstdf;
  fn.eps = dims_.eps;
  be.RmsNormForward(fn);
  const int64_t head_off = dims_.tied ? layout.embedding_offset() : layout.lm_head_offset();
  be.Gemm({.a = xf, .b = params.at(0, head_off, {V, D}), .c = logits, .trans_b = true});
  if (dtype_ == DType::kF32) {
    be.CopyToHost(logits_out, logits);
  } else {
    std::vector<double> host(m * V);
    be.CopyToHost(host.data(), logits);
    std::copy(host.begin(), host.end(), logits_out);
  }
  position_ += c;
}

absl::StatusOr<std::vector<float>> InferenceEngine::Prefill(absl::Span<const int32_t> tokens,
                                                            std::vector<float>* all_logits) {
  absl::Status st = CheckTokens(tokens);
  if (!st.ok()) return st;
  const int64_t T = static_cast<int64_t>(tokens.size()), V = dims_.vocab, first_position = position_;
  captured_.clear();
  if (capture_) {
    captured_.resize(dims_.layers);
    for (int l = 0; l < dims_.layers; ++l) {
      CapturedAttention& c = captured_[l];
      c.layer = l;
      c.kind = KindName(dims_.kinds[l]);
      c.uses_rope = dims_.uses_rope(l);
      c.window = dims_.layer_window(l);
      c.rotary_dim = c.uses_rope ? dims_.rope_dim : 0;
      c.heads = dims_.heads;
      c.kv_heads = dims_.kv_heads;
      c.head_dim = dims_.head_dim;
    }
  }
  const int64_t chunk = options_.prefill_chunk > 0 ? options_.prefill_chunk : T;
  std::vector<float> last(V);
  if (all_logits) all_logits->assign(T * V, 0.f);
  for (int64_t b = 0; b < T; b += chunk) {
    const int64_t e = std::min(T, b + chunk);
    Step(tokens.subspan(b, e - b), all_logits != nullptr, all_logits ? all_logits->data() + b * V : last.data());
  }
  if (all_logits) std::copy(all_logits->end() - V, all_logits->end(), last.begin());
  if (capture_) {
    for (const CapturedAttention& c : captured_) capture_(c, first_position);
    captured_.clear();
  }
  return last;
}

absl::StatusOr<std::vector<float>> InferenceEngine::Decode(int32_t token) {
  absl::Status st = CheckTokens({&token, 1});
  if (!st.ok()) return st;
  std::vector<float> logits(dims_.vocab);
  Step({&token, 1}, false, logits.data());
  return logits;
}

}  // namespace longctx
