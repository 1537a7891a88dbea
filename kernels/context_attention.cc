// Why: see context_attention.h.
#include "kernels/context_attention.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/ops.h"

namespace longctx {
namespace {

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("context attention: ", what)); }

Tensor I32(const std::vector<int32_t>& v) {
  return Tensor(const_cast<int32_t*>(v.data()), DType::kI32, {static_cast<int64_t>(v.size())});
}

absl::Status CheckShapes(const ContextBlockPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t nq = plan.q_end - plan.q_begin;
  if (q.ndim != 3 || q.shape[0] != nq)
    return Bad(absl::StrCat("q must be [", nq, ", H, d] (queries [", plan.q_begin, ", ", plan.q_end, ")), is ",
                            q.DebugString()));
  if (k.ndim != 3 || v.ndim != 3 || k.shape[0] != plan.num_keys() || v.shape[0] != plan.num_keys())
    return Bad(absl::StrCat("k, v must hold the block's ", plan.num_keys(), " keys [", plan.k_begin, ", ", plan.k_end,
                            "), are ", k.DebugString(), " and ", v.DebugString()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ContextBlockPlan> PlanContextBlock(absl::Span<const int32_t> cu, int64_t q0, int64_t q1, int64_t k0,
                                                  int64_t k1, int window) {
  if (cu.size() < 2 || cu[0] != 0) return Bad("row_cu_seqlens must start at 0 and hold at least one document");
  for (size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1]) return Bad(absl::StrCat("row_cu_seqlens decreases at ", i));
  const int64_t t = cu.back();
  if (q0 < 0 || q0 > q1 || q1 > t)
    return Bad(absl::StrCat("query range [", q0, ", ", q1, ") outside the row's [0, ", t, ")"));
  if (k0 < 0 || k0 > k1 || k1 > t)
    return Bad(absl::StrCat("key range [", k0, ", ", k1, ") outside the row's [0, ", t, ")"));
  if (window < 0) return Bad(absl::StrCat("window must be >= 0, is ", window));
  ContextBlockPlan plan;
  plan.q_begin = q0;
  plan.q_end = q1;
  plan.window = window;
  // The keys document d's queries [qa, qb) see: [max(ds, qa - w + 1), qb),
  // within the offered range. Their hull over the chunk's documents is the
  // block (only the chunk's first document can reach before q0, so the hull
  // holds no key of a document the chunk lacks).
  int64_t lo = k1, hi = k0;
  for (size_t d = 0; d + 1 < cu.size(); ++d) {
    const int64_t ds = cu[d], de = cu[d + 1];
    const int64_t qa = std::max(ds, q0), qb = std::min(de, q1);
    if (qa >= qb) continue;
    int64_t a = window > 0 ? std::max(ds, qa - window + 1) : ds;
    a = std::max(a, k0);
    const int64_t b = std::min(qb, k1);
    if (a >= b) continue;
    lo = std::min(lo, a);
    hi = std::max(hi, b);
  }
  if (lo >= hi) {
    plan.k_begin = plan.k_end = k0;
    return plan;  // skipped
  }
  plan.k_begin = lo;
  plan.k_end = hi;
  plan.cu_q.push_back(0);
  plan.cu_k.push_back(0);
  for (size_t d = 0; d + 1 < cu.size(); ++d) {
    const int64_t ds = cu[d], de = cu[d + 1];
    const int64_t nq = std::max<int64_t>(0, std::min(de, q1) - std::max(ds, q0));
    const int64_t nk = std::max<int64_t>(0, std::min(de, hi) - std::max(ds, lo));
    if (nq == 0 && nk == 0) continue;
    plan.cu_q.push_back(static_cast<int32_t>(plan.cu_q.back() + nq));
    plan.cu_k.push_back(static_cast<int32_t>(plan.cu_k.back() + nk));
  }
  return plan;
}

int64_t ContextBlockKvBytes(const ContextBlockPlan& plan, int64_t kv_heads, int64_t head_dim, int64_t element_bytes) {
  return plan.skipped() ? 0 : 2 * plan.num_keys() * kv_heads * head_dim * element_bytes;
}

AttentionParams ContextBlockParams(const ContextBlockPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& o, const Tensor& lse, double scale) {
  AttentionParams p;
  p.q = q;
  p.k = k;
  p.v = v;
  p.o = o;
  p.lse = lse;
  p.cu_seqlens = I32(plan.cu_q);
  p.cu_seqlens_k = I32(plan.cu_k);
  p.window = plan.window;
  p.scale = scale;
  p.query_offset_set = true;
  p.query_offset = plan.query_offset();
  return p;
}

absl::Status ContextBlockForward(Backend& backend, const ContextBlockPlan& plan, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& o, const Tensor& lse, double scale) {
  if (plan.skipped())
    return absl::FailedPreconditionError(absl::StrCat("context attention: block of keys [", plan.k_begin, ", ",
                                                      plan.k_end, ") is skipped (no query of [", plan.q_begin, ", ",
                                                      plan.q_end, ") sees any key): nothing to compute"));
  if (absl::Status s = CheckShapes(plan, q, k, v); !s.ok()) return s;
  const AttentionParams p = ContextBlockParams(plan, q, k, v, o, lse, scale);
  if (absl::Status s = p.Validate(false); !s.ok()) return s;
  backend.AttentionForward(p);
  return absl::OkStatus();
}

absl::Status ContextBlockBackward(Backend& backend, const ContextBlockPlan& plan, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& o, const Tensor& lse, const Tensor& d_o,
                                  const Tensor& dq, const Tensor& dk, const Tensor& dv, double scale) {
  if (plan.skipped())
    return absl::FailedPreconditionError(absl::StrCat("context attention: block of keys [", plan.k_begin, ", ",
                                                      plan.k_end, ") is skipped: no gradient to compute"));
  if (absl::Status s = CheckShapes(plan, q, k, v); !s.ok()) return s;
  AttentionParams p = ContextBlockParams(plan, q, k, v, o, lse, scale);
  p.d_o = d_o;
  p.dq = dq;
  p.dk = dk;
  p.dv = dv;
  if (absl::Status s = p.Validate(true); !s.ok()) return s;
  backend.AttentionBackward(p);
  return absl::OkStatus();
}

absl::Status MergeAttentionParts(Backend& backend, absl::Span<const Tensor> os, absl::Span<const Tensor> lses,
                                 const Tensor& o, const Tensor& lse) {
  if (os.empty() || os.size() != lses.size())
    return Bad(absl::StrCat("merge needs one lse per output and at least one part (", os.size(), " outputs, ",
                            lses.size(), " lse)"));
  if (os.size() == 1) {
    if (os[0].data != o.data) backend.Copy(o, os[0]);
    if (lses[0].data != lse.data) backend.Copy(lse, lses[0]);
    return absl::OkStatus();
  }
  for (size_t i = 2; i < os.size(); ++i)
    if (os[i].data == o.data || lses[i].data == lse.data)
      return Bad(absl::StrCat("merge output aliases part ", i, " (only part 0 or 1 may be the output)"));
  // Folded left to right: part 0 with part 1 into o, then o with each next
  // part in place (AttentionMerge allows o == o1).
  for (size_t i = 1; i < os.size(); ++i) {
    AttentionMergeParams m;
    m.o1 = i == 1 ? os[0] : o;
    m.lse1 = i == 1 ? lses[0] : lse;
    m.o2 = os[i];
    m.lse2 = lses[i];
    m.o = o;
    m.lse = lse;
    if (absl::Status s = m.Validate(); !s.ok()) return s;
    backend.AttentionMerge(m);
  }
  return absl::OkStatus();
}

}  // namespace longctx
