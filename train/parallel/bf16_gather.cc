// Why: see bf16_gather.h.
#include "train/parallel/bf16_gather.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/math/bf16.h"
#include "train/parallel/collectives.h"

namespace longctx {

namespace {

// Calls f(begin, end, matmul) for the consecutive pieces of [lo, hi), each
// wholly inside or outside the sorted ranges m.
template <class F>
void ForEachPiece(const std::vector<ElementRange>& m, int64_t lo, int64_t hi, F&& f) {
  int64_t p = lo;
  for (const ElementRange& r : m) {
    if (p >= hi) break;
    if (r.end <= p) continue;
    if (r.begin >= hi) break;
    if (r.begin > p) {
      f(p, r.begin, false);
      p = r.begin;
    }
    const int64_t e = std::min(r.end, hi);
    f(p, e, true);
    p = e;
  }
  if (p < hi) f(p, hi, false);
}

int64_t UnitsOf(const std::vector<ElementRange>& m, ElementRange range) {
  int64_t u = 0;
  ForEachPiece(m, range.begin, range.end, [&](int64_t b, int64_t e, bool mm) { u += (e - b) * (mm ? 1 : 2); });
  return u;
}

}  // namespace

std::vector<ElementRange> MatmulOnlyRanges(const ParamLayout& layout, int b) {
  std::vector<ElementRange> out;
  for (const ParamSlice& s : layout.slices()) {
    if (s.buffer != b || !s.is_matrix || s.name == "model.embed_tokens.weight") continue;
    if (!out.empty() && out.back().end == s.offset)
      out.back().end += s.numel();  // q, k, v (gate, up) are adjacent
    else
      out.push_back({s.offset, s.offset + s.numel()});
  }
  std::sort(out.begin(), out.end(), [](const ElementRange& x, const ElementRange& y) { return x.begin < y.begin; });
  return out;
}

Bf16Gather::Bf16Gather(const ParamLayout* layout, int world) : layout_(layout), world_(world) {
  for (int b = 0; b < layout->num_buffers(); ++b) {
    matmul_.push_back(MatmulOnlyRanges(*layout, b));
    int64_t u = 0;
    for (int r = 0; r < world; ++r) u = std::max(u, UnitsOf(matmul_.back(), ShardOf(layout->buffer_size(b), r, world)));
    units_.push_back(u);
  }
}

int64_t Bf16Gather::fp32_units(int b) const { return 2 * ShardOf(layout_->buffer_size(b), 0, world_).size(); }

absl::Status Bf16Gather::Gather(Communicator& comm, int b, const Tensor& shard, const Tensor& full) {
  const int64_t n = layout_->buffer_size(b);
  const ElementRange mine = ShardOf(n, comm.rank(), world_);
  if (comm.world_size() != world_ || shard.dtype != DType::kF32 || full.dtype != DType::kF32 ||
      shard.numel() != mine.size() || full.numel() != n || shard.device != Device::kCpu ||
      full.device != Device::kCpu)
    return absl::InvalidArgumentError(absl::StrCat("bf16 gather of buffer ", b, ": ", comm.Where(), " expects its ",
                                                   mine.size(), "-element fp32 shard and the ", n,
                                                   "-element fp32 buffer in host memory; got ", shard.DebugString(),
                                                   " and ", full.DebugString()));
  const int64_t u = units_[b];
  send_.assign(static_cast<size_t>(u), 0);
  recv_.resize(static_cast<size_t>(u * world_));
  const float* src = shard.as<float>();
  int64_t k = 0;
  ForEachPiece(matmul_[b], mine.begin, mine.end, [&](int64_t lo, int64_t hi, bool mm) {
    const float* s = src + (lo - mine.begin);
    if (mm) {
      for (int64_t i = 0; i < hi - lo; ++i) send_[k + i] = math::F32ToBf16Bits(s[i]);
      k += hi - lo;
    } else {
      std::memcpy(send_.data() + k, s, static_cast<size_t>(hi - lo) * sizeof(float));
      k += 2 * (hi - lo);
    }
  });
  {
    CommTimer timer;
    if (absl::Status st = comm.AllGather(send_.data(), u * world_, DType::kBF16, recv_.data()); !st.ok())
      return absl::Status(st.code(), absl::StrCat("bf16 gather of buffer ", b, ": ", st.message()));
  }
  float* dst = full.as<float>();
  for (int r = 0; r < world_; ++r) {
    const ElementRange rr = ShardOf(n, r, world_);
    const uint16_t* in = recv_.data() + r * u;
    ForEachPiece(matmul_[b], rr.begin, rr.end, [&](int64_t lo, int64_t hi, bool mm) {
      if (mm) {
        for (int64_t i = 0; i < hi - lo; ++i) dst[lo + i] = math::Bf16BitsToF32(in[i]);
        in += hi - lo;
      } else {
        std::memcpy(dst + lo, in, static_cast<size_t>(hi - lo) * sizeof(float));
        in += 2 * (hi - lo);
      }
    });
  }
  return absl::OkStatus();
}

}  // namespace longctx
