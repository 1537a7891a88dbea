// Why: the shape/dtype rules of every op in one place, checked once before a
// backend runs the op. Each message names the op and the offending tensor.
#include "kernels/ops.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include "base/status_macros.h"

#include "absl/strings/str_cat.h"

namespace longctx {
namespace {

bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF64; }

absl::Status Bad(const char* op, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", msg));
}

absl::Status NeedFloat(const char* op, const char* name, const Tensor& t, int ndim) {
  if (!t.defined()) return Bad(op, absl::StrCat(name, " is not set"));
  if (!IsFloat(t.dtype)) return Bad(op, absl::StrCat(name, " must be F32 or F64, is ", t.DebugString()));
  if (t.ndim != ndim) return Bad(op, absl::StrCat(name, " must be ", ndim, "-D, is ", t.DebugString()));
  return absl::OkStatus();
}

absl::Status SameShape(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                       const Tensor& b) {
  bool same = a.ndim == b.ndim && a.dtype == b.dtype;
  for (int i = 0; same && i < a.ndim; ++i) same = a.shape[i] == b.shape[i];
  if (!same) return Bad(op, absl::StrCat(a_name, " ", a.DebugString(), " vs ", b_name, " ", b.DebugString()));
  return absl::OkStatus();
}


// An output of `like`'s shape and dtype, or BF16 of its shape where `like`
// is F32: a copy for bf16 products, rounded as Copy rounds.
absl::Status Bf16OutputOrSameShape(const char* op, const char* name, const Tensor& out, const char* like_name,
                                   const Tensor& like) {
  if (!out.defined() || out.dtype != DType::kBF16 || like.dtype != DType::kF32)
    return SameShape(op, name, out, like_name, like);
  bool same = out.ndim == like.ndim;
  for (int i = 0; same && i < out.ndim; ++i) same = out.shape[i] == like.shape[i];
  if (!same) return Bad(op, absl::StrCat(name, " ", out.DebugString(), " vs ", like_name, " ", like.DebugString()));
  return absl::OkStatus();
}

}  // namespace

absl::Status GemmParams::Validate() const {
  const char* op = "Gemm";
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "c", c, 2));
  // An operand is c's dtype, or a BF16 copy the caller made (F32 c only).
  for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"a", a}, {"b", b}}) {
    if (t.defined() && t.dtype == DType::kBF16) {
      if (c.dtype != DType::kF32)
        return Bad(op, absl::StrCat(name, " is BF16, which needs an F32 c; c is ", c.DebugString()));
      if (t.ndim != 2) return Bad(op, absl::StrCat(name, " must be 2-D, is ", t.DebugString()));
      continue;
    }
    LONGCTX_RETURN_IF_ERROR(NeedFloat(op, name, t, 2));
    if (t.dtype != c.dtype)
      return Bad(op, absl::StrCat(name, " ", t.DebugString(), " must have c's dtype ", DTypeName(c.dtype),
                                  c.dtype == DType::kF32 ? " or be BF16" : ""));
  }
  int64_t m = trans_a ? a.shape[1] : a.shape[0];
  int64_t k = trans_a ? a.shape[0] : a.shape[1];
  int64_t kb = trans_b ? b.shape[1] : b.shape[0];
  int64_t n = trans_b ? b.shape[0] : b.shape[1];
  if (k != kb || c.shape[0] != m || c.shape[1] != n)
    return Bad(op, absl::StrCat("shapes do not chain: a ", a.DebugString(), trans_a ? "^T" : "", " b ",
                                b.DebugString(), trans_b ? "^T" : "", " c ", c.DebugString()));
  return absl::OkStatus();
}

absl::Status EmbeddingParams::Validate() const {
  const char* op = "Embedding";
  if (!ids.defined() || ids.dtype != DType::kI32 || ids.ndim != 1) return Bad(op, "ids must be I32 [N]");
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "table", table, 2));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "out", out, 2));
  if (out.shape[0] != ids.shape[0] || out.shape[1] != table.shape[1] || out.dtype != table.dtype)
    return Bad(op, absl::StrCat("out ", out.DebugString(), " vs ids ", ids.DebugString(), " table ",
                                table.DebugString()));
  return absl::OkStatus();
}

absl::Status RmsNormParams::Validate(bool backward) const {
  const char* op = backward ? "RmsNormBackward" : "RmsNormForward";
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "x", x, 2));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "weight", weight, 1));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "rstd", rstd, 1));
  if (weight.shape[0] != x.shape[1] || rstd.shape[0] != x.shape[0] || weight.dtype != x.dtype ||
      rstd.dtype != x.dtype)
    return Bad(op, absl::StrCat("x ", x.DebugString(), " weight ", weight.DebugString(), " rstd ",
                                rstd.DebugString()));
  if (!(eps > 0)) return Bad(op, "eps must be > 0");
  if (!backward) return Bf16OutputOrSameShape(op, "y", y, "x", x);
  LONGCTX_RETURN_IF_ERROR(SameShape(op, "dy", dy, "x", x));
  LONGCTX_RETURN_IF_ERROR(SameShape(op, "dx", dx, "x", x));
  return SameShape(op, "dweight", dweight, "weight", weight);
}

absl::Status RopeParams::Validate() const {
  const char* op = "Rope";
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "x", x, 3));
  if (!positions.defined() || positions.dtype != DType::kI32 || positions.ndim != 1 ||
      positions.shape[0] != x.shape[0])
    return Bad(op, absl::StrCat("positions must be I32 [", x.shape[0], "]"));
  int rd = rotary_dim == 0 ? static_cast<int>(x.shape[2]) : rotary_dim;
  if (rd <= 0 || rd % 2 != 0 || rd > x.shape[2])
    return Bad(op, absl::StrCat("rotary_dim ", rd, " must be even and <= head_dim ", x.shape[2]));
  if (direction != 1 && direction != -1) return Bad(op, "direction must be +1 or -1");
  if (!(theta > 0)) return Bad(op, "theta must be > 0");
  return absl::OkStatus();
}

absl::Status SwiGluParams::Validate(bool backward) const {
  const char* op = backward ? "SwiGluBackward" : "SwiGluForward";
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "gate_up", gate_up, 2));
  if (gate_up.shape[1] % 2 != 0) return Bad(op, "gate_up must have an even number of columns");
  const Tensor& out = backward ? dh : h;
  const char* out_name = backward ? "dh" : "h";
  const bool bf16_h = !backward && out.defined() && out.dtype == DType::kBF16 && gate_up.dtype == DType::kF32;
  if (!bf16_h) LONGCTX_RETURN_IF_ERROR(NeedFloat(op, out_name, out, 2));
  if (out.ndim != 2 || out.shape[0] != gate_up.shape[0] || 2 * out.shape[1] != gate_up.shape[1] ||
      (out.dtype != gate_up.dtype && !bf16_h))
    return Bad(op, absl::StrCat(out_name, " ", out.DebugString(), " vs gate_up ", gate_up.DebugString()));
  if (!backward) return absl::OkStatus();
  return Bf16OutputOrSameShape(op, "dgate_up", dgate_up, "gate_up", gate_up);
}

absl::Status AttentionParams::Validate(bool backward) const {
  const char* op = backward ? "AttentionBackward" : "AttentionForward";
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "q", q, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "k", k, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "v", v, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "o", o, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "lse", lse, 2));
  const int64_t n = q.shape[0], h = q.shape[1], d = q.shape[2], hkv = k.shape[1];
  const int64_t nk = cu_seqlens_k.defined() ? k.shape[0] : n;
  if (k.shape[0] != nk || v.shape[0] != nk || o.shape[0] != n || k.shape[2] != d || v.shape[2] != d ||
      v.shape[1] != hkv || o.shape[1] != h || o.shape[2] != d)
    return Bad(op, absl::StrCat("q ", q.DebugString(), " k ", k.DebugString(), " v ", v.DebugString(), " o ",
                                o.DebugString()));
  if (hkv <= 0 || h % hkv != 0) return Bad(op, absl::StrCat("num_heads ", h, " not a multiple of kv heads ", hkv));
  if (lse.shape[0] != h || lse.shape[1] != n) return Bad(op, absl::StrCat("lse must be [", h, ", ", n, "]"));
  if (k.dtype != q.dtype || v.dtype != q.dtype || o.dtype != q.dtype || lse.dtype != q.dtype)
    return Bad(op, "q, k, v, o, lse must share a dtype");
  if (!cu_seqlens.defined() || cu_seqlens.dtype != DType::kI32 || cu_seqlens.ndim != 1 || cu_seqlens.shape[0] < 2)
    return Bad(op, "cu_seqlens must be I32 [segments + 1] with at least one segment");
  if (cu_seqlens.device == Device::kCpu) {
    const int32_t* cu = cu_seqlens.as<int32_t>();
    if (cu[0] != 0 || cu[cu_seqlens.shape[0] - 1] != n) return Bad(op, "cu_seqlens must start at 0 and end at N");
    for (int64_t i = 1; i < cu_seqlens.shape[0]; ++i)
      if (cu[i] < cu[i - 1]) return Bad(op, absl::StrCat("cu_seqlens decreases at ", i));
  }
  if (window < 0) return Bad(op, "window must be >= 0");
  if (scale < 0) return Bad(op, "scale must be >= 0");
  if (diagonal_offset < 0) return Bad(op, "diagonal_offset must be >= 0");
  if (query_offset_set && !cu_seqlens_k.defined())
    return Bad(op, "query_offset_set needs cu_seqlens_k (the keys' own segments)");
  if (cu_seqlens_k.defined()) {
    if (backward && !query_offset_set)
      return Bad(op, "cu_seqlens_k is forward-only (inference) unless query_offset_set (context parallelism)");
    if (cu_seqlens_k.dtype != DType::kI32 || cu_seqlens_k.ndim != 1 || cu_seqlens_k.shape[0] != cu_seqlens.shape[0])
      return Bad(op, absl::StrCat("cu_seqlens_k must be I32 [", cu_seqlens.shape[0], "] like cu_seqlens"));
    if (cu_seqlens_k.device == Device::kCpu) {
      const int32_t* ck = cu_seqlens_k.as<int32_t>();
      if (ck[0] != 0 || ck[cu_seqlens_k.shape[0] - 1] != nk)
        return Bad(op, "cu_seqlens_k must start at 0 and end at the number of keys");
      for (int64_t i = 1; i < cu_seqlens_k.shape[0]; ++i) {
        if (ck[i] < ck[i - 1]) return Bad(op, absl::StrCat("cu_seqlens_k decreases at ", i));
        if (cu_seqlens.device == Device::kCpu) {
          const int32_t* cq = cu_seqlens.as<int32_t>();
          if (!query_offset_set && ck[i] - ck[i - 1] < cq[i] - cq[i - 1])
            return Bad(op, absl::StrCat("segment ", i - 1, " has ", cq[i] - cq[i - 1], " queries but only ",
                                        ck[i] - ck[i - 1], " keys"));
        }
      }
    }
  }
  if (backward && diagonal_offset != 0) return Bad(op, "diagonal_offset is forward-only (inference)");
  if (!backward) return absl::OkStatus();
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "d_o", d_o, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "dq", dq, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "dk", dk, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "dv", dv, 3));
  for (const Tensor* t : {&d_o, &dq})
    if (t->shape[0] != n || t->shape[1] != h || t->shape[2] != d || t->dtype != q.dtype)
      return Bad(op, absl::StrCat("d_o/dq must match q: ", t->DebugString()));
  for (const Tensor* t : {&dk, &dv})
    if (t->shape[0] != nk || t->shape[1] != hkv || t->shape[2] != d || t->dtype != q.dtype)
      return Bad(op, absl::StrCat("dk/dv must match k: ", t->DebugString()));
  return absl::OkStatus();
}

absl::Status AttentionMergeParams::Validate() const {
  const char* op = "AttentionMerge";
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "o1", o1, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "lse1", lse1, 2));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "o2", o2, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "lse2", lse2, 2));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "o", o, 3));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "lse", lse, 2));
  for (const Tensor* t : {&o2, &o})
    if (t->shape[0] != o1.shape[0] || t->shape[1] != o1.shape[1] || t->shape[2] != o1.shape[2] ||
        t->dtype != o1.dtype)
      return Bad(op, absl::StrCat("o1 ", o1.DebugString(), " vs ", t->DebugString()));
  for (const Tensor* t : {&lse1, &lse2, &lse})
    if (t->shape[0] != o1.shape[1] || t->shape[1] != o1.shape[0] || t->dtype != o1.dtype)
      return Bad(op, absl::StrCat("lse must be [", o1.shape[1], ", ", o1.shape[0], "] of o1's dtype, is ",
                                  t->DebugString()));
  return absl::OkStatus();
}

absl::Status LmHeadLossParams::Validate() const {
  const char* op = "LmHeadLoss";
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "x", x, 2));
  LONGCTX_RETURN_IF_ERROR(NeedFloat(op, "weight", weight, 2));
  if (weight.shape[1] != x.shape[1] || weight.dtype != x.dtype)
    return Bad(op, absl::StrCat("x ", x.DebugString(), " weight ", weight.DebugString()));
  if (!targets.defined() || targets.dtype != DType::kI32 || targets.ndim != 1 || targets.shape[0] != x.shape[0])
    return Bad(op, "targets must be I32 [N]");
  if (targets.device == Device::kCpu) {
    const int32_t* t = targets.as<int32_t>();
    for (int64_t i = 0; i < targets.shape[0]; ++i)
      if (t[i] >= weight.shape[0]) return Bad(op, absl::StrCat("target ", t[i], " at ", i, " >= vocab ", weight.shape[0]));
  }
  if (dx.defined()) LONGCTX_RETURN_IF_ERROR(SameShape(op, "dx", dx, "x", x));
  if (dweight.defined()) LONGCTX_RETURN_IF_ERROR(SameShape(op, "dweight", dweight, "weight", weight));
  if (losses.defined() && (losses.ndim != 1 || losses.shape[0] != x.shape[0] || losses.dtype != x.dtype))
    return Bad(op, "losses must be [N] of x's dtype");
  if (chunk_tokens < 0) return Bad(op, absl::StrCat("chunk_tokens must be >= 0 (0 = the default), is ", chunk_tokens));
  return absl::OkStatus();
}

int64_t LmHeadLossParams::ChunkRows() const {
  return LmHeadChunkRows(chunk_tokens, weight.shape[0]);
}

int64_t DefaultLmHeadChunkRows(int64_t vocab) {
  constexpr int64_t kBudgetBytes = int64_t{128} << 20, kMinRows = 256, kMaxRows = 1024;
  const int64_t fit = kBudgetBytes / (std::max<int64_t>(vocab, 1) * static_cast<int64_t>(sizeof(float)));
  return std::clamp(fit, kMinRows, kMaxRows);
}

int64_t LmHeadChunkRows(int64_t asked, int64_t vocab) {
  return asked > 0 ? asked : DefaultLmHeadChunkRows(vocab);
}

absl::Status AdamWParams::Validate() const {
  const char* op = "AdamW";
  for (const Tensor* t : {&param, &grad, &m, &v}) {
    if (!t->defined() || !IsFloat(t->dtype) || !t->contiguous()) return Bad(op, "param/grad/m/v must be dense floats");
    if (t->numel() != param.numel() || t->dtype != param.dtype) return Bad(op, "param/grad/m/v differ in size or dtype");
  }
  if (step < 1) return Bad(op, "step is 1-based");
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1)) return Bad(op, "betas must be in [0, 1)");
  return absl::OkStatus();
}

}  // namespace longctx
