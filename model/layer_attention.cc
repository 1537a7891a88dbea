// Why: see layer_attention.h. Every step is a backend op; the only host work
// is the shifted query positions of STRING's part 2 (a host I32 tensor, which
// a device backend stages like any host index tensor).
#include "model/layer_attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace longctx {
namespace {

// Multiplies the first rotary_dim dims of every head of x [n, heads, hd] by
// factor: the rotated dims are exactly what scaled cos/sin tables scale.
void ScaleRotaryDims(Backend& be, const Tensor& x, int rotary_dim, double factor) {
  const int64_t n = x.shape[0], heads = x.shape[1], hd = x.shape[2];
  if (rotary_dim == hd) {
    Tensor all(x.data, x.dtype, {n, heads * hd}, x.device);
    all.row_stride = x.stride0();
    be.Scale(all, factor);
    return;
  }
  const size_t esize = DTypeSize(x.dtype);
  for (int64_t h = 0; h < heads; ++h) {
    Tensor cols(static_cast<char*>(x.data) + h * hd * esize, x.dtype, {n, rotary_dim}, x.device);
    cols.row_stride = x.stride0();
    be.Scale(cols, factor);
  }
}

void Rotate(Backend& be, const ModelDims& d, const Tensor& x, const Tensor& positions, int rotary_dim,
            int direction) {
  RopeParams r;
  r.x = x;
  r.positions = positions;
  r.theta = d.theta;
  r.rotary_dim = rotary_dim;
  r.direction = direction;
  be.Rope(r);
}

}  // namespace

absl::Status ValidateStringOptions(const StringOptions& o) {
  if (!o.enabled) return absl::OkStatus();
  if (o.s < 1) return absl::InvalidArgumentError(absl::StrCat("string.s: must be >= 1 (got ", o.s, ")"));
  if (o.w < 0) return absl::InvalidArgumentError(absl::StrCat("string.w: must be >= 0 (got ", o.w, ")"));
  return absl::OkStatus();
}

double StringRopeTableScale(const StringOptions& o) { return o.rope_scale ? 1.0 + 0.1 * std::log(2.0) : 1.0; }

StringPlan MakeStringPlan(const StringOptions& o, bool uses_rope, int layer_window) {
  StringPlan p;
  if (!o.enabled || !uses_rope || (layer_window > 0 && layer_window <= o.s)) return p;
  p.active = true;
  p.part1 = {o.s, 0, 0};
  p.part2 = {layer_window, o.s, o.w - o.s};
  return p;
}

int64_t StringPlanPosition(const StringPlan& plan, int layer_window, int64_t i, int64_t j) {
  const int64_t d = i - j;
  if (d < 0 || (layer_window > 0 && d >= layer_window)) return -1;
  if (!plan.active) return d;
  auto sees = [d](const StringPart& p) { return d >= p.offset && (p.window == 0 || d < p.window); };
  const bool s1 = sees(plan.part1), s2 = sees(plan.part2);
  if (s1 && s2) return -2;  // the parts overlap: a broken plan
  if (s1) return i + plan.part1.q_shift - j;
  if (s2) return i + plan.part2.q_shift - j;
  return -1;
}

void RotateKeysValues(Backend& be, const ModelDims& dims, int layer, const StringOptions& string, const Tensor& k,
                      const Tensor& v, const Tensor& positions) {
  if (!dims.uses_rope(layer)) return;
  Rotate(be, dims, k, positions, dims.rope_dim, +1);
  if (string.rope_scale && MakeStringPlan(string, true, dims.layer_window(layer)).active)
    ScaleRotaryDims(be, k, dims.rope_dim, StringRopeTableScale(string));
  if (dims.uses_roper(layer)) Rotate(be, dims, v, positions, dims.roper_dim, +1);
}

void LayerAttention::EnsureScratch(int64_t nq, int64_t heads, int64_t head_dim) {
  if (nq <= scratch_rows_) return;
  const size_t esize = DTypeSize(dtype_);
  auto aligned = [](size_t b) { return (b + 63) / 64 * 64; };
  const size_t qbytes = aligned(nq * heads * head_dim * esize), lbytes = aligned(heads * nq * esize);
  scratch_ = DeviceBuffer(backend_, 2 * qbytes + lbytes);
  scratch_rows_ = nq;
}

void LayerAttention::Forward(const LayerAttentionArgs& a) {
  const ModelDims& d = *a.dims;
  Backend& be = *backend_;
  const int window = d.layer_window(a.layer);
  const bool rope = d.uses_rope(a.layer), roper = d.uses_roper(a.layer);
  const StringPlan plan = MakeStringPlan(a.string, rope, window);
  AttentionParams at;
  at.k = a.k;
  at.v = a.v;
  at.cu_seqlens = a.cu_seqlens;
  at.cu_seqlens_k = a.cu_seqlens_k;
  at.q = a.q;
  at.o = a.o;
  at.lse = a.lse;
  if (!plan.active) {
    if (rope) Rotate(be, d, a.q, a.q_positions, d.rope_dim, +1);
    at.window = window;
    if (a.context != nullptr)
      a.context->Forward(a.layer, window, a.q, a.k, a.v, a.o, a.lse);
    else
      be.AttentionForward(at);
    if (roper) Rotate(be, d, a.o, a.q_positions, d.roper_dim, -1);
    return;
  }

  CHECK(a.context == nullptr) << "LayerAttention: STRING is inference-only; context parallelism trains";
  CHECK(a.q_positions_host != nullptr) << "LayerAttention: STRING needs the query positions on the host";
  const int64_t nq = a.q.shape[0], heads = a.q.shape[1], hd = a.q.shape[2];
  EnsureScratch(nq, heads, hd);
  const size_t esize = DTypeSize(dtype_);
  const size_t qbytes = (scratch_rows_ * heads * hd * esize + 63) / 64 * 64;
  char* base = static_cast<char*>(scratch_.data());
  const Tensor q2(base, dtype_, {nq, heads, hd}, be.device());
  const Tensor o2(base + qbytes, dtype_, {nq, heads, hd}, be.device());
  const Tensor lse2(base + 2 * qbytes, dtype_, {heads, nq}, be.device());

  // Part 2's query positions i - S + W. A row with i - S + W < 0 has i < S,
  // hence no part-2 key; its position is clamped to 0 (any value would do).
  shifted_positions_.resize(nq);
  for (int64_t t = 0; t < nq; ++t)
    shifted_positions_[t] = std::max<int32_t>(0, a.q_positions_host[t] + plan.part2.q_shift);
  const Tensor shifted(shifted_positions_.data(), DType::kI32, {nq}, Device::kCpu);

  be.Copy(q2, a.q);
  Rotate(be, d, a.q, a.q_positions, d.rope_dim, +1);
  Rotate(be, d, q2, shifted, d.rope_dim, +1);
  if (a.string.rope_scale) {
    const double s = StringRopeTableScale(a.string);
    ScaleRotaryDims(be, a.q, d.rope_dim, s);
    ScaleRotaryDims(be, q2, d.rope_dim, s);
  }
  at.window = plan.part1.window;
  at.diagonal_offset = plan.part1.offset;
  be.AttentionForward(at);
  at.q = q2;
  at.o = o2;
  at.lse = lse2;
  at.window = plan.part2.window;
  at.diagonal_offset = plan.part2.offset;
  be.AttentionForward(at);
  if (roper) {
    Rotate(be, d, a.o, a.q_positions, d.roper_dim, -1);
    Rotate(be, d, o2, shifted, d.roper_dim, -1);
  }
  AttentionMergeParams m;
  m.o1 = a.o;
  m.lse1 = a.lse;
  m.o2 = o2;
  m.lse2 = lse2;
  m.o = a.o;
  m.lse = a.lse;
  be.AttentionMerge(m);
}

}  // namespace longctx
