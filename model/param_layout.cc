// Why: see param_layout.h. The order inside a layer buffer is chosen so that
// fused matrices are contiguous: q|k|v rows form one [(H+2Hkv)·hd, D] matrix
// (one GEMM for all three projections) and gate|up rows one [2F, D] matrix.
#include "model/param_layout.h"

#include <algorithm>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace longctx {

void GenerateInitialParams(const ParamLayout& layout, const ModelDims& dims, uint64_t seed,
                           const InitialValuesSink& sink) {
  constexpr int64_t kPiece = 65536;
  std::mt19937_64 rng(seed);
  std::vector<double> piece(kPiece);
  for (int b = 0; b < layout.num_buffers(); ++b) {
    for (const ParamSlice& s : layout.slices()) {
      if (s.buffer != b) continue;
      const bool norm = absl::EndsWith(s.name, "norm.weight");
      const bool out_proj = absl::StrContains(s.name, "o_proj") || absl::StrContains(s.name, "down_proj");
      // One distribution per slice, as Transformer::InitParams (it caches a second draw).
      std::normal_distribution<double> normal(0.0, out_proj ? dims.out_init_std : dims.init_std);
      for (int64_t i = 0; i < s.numel(); i += kPiece) {
        const int64_t n = std::min(kPiece, s.numel() - i);
        for (int64_t j = 0; j < n; ++j) piece[j] = norm ? 1.0 : normal(rng);
        sink(b, s.offset + i, piece.data(), n);
      }
    }
  }
}

int64_t ParamSlice::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void ParamLayout::Add(const std::string& name, int buffer, std::vector<int64_t> shape, int64_t* cursor) {
  ParamSlice s;
  s.name = name;
  s.buffer = buffer;
  s.offset = *cursor;
  s.shape = std::move(shape);
  s.is_matrix = s.shape.size() == 2;
  *cursor += s.numel();
  slices_.push_back(std::move(s));
}

ParamLayout::ParamLayout(const ModelDims& d) {
  const int64_t D = d.hidden, V = d.vocab, hd = d.head_dim, H = d.heads, Hkv = d.kv_heads, F = d.ffn;
  int64_t top = 0;
  Add("model.embed_tokens.weight", 0, {V, D}, &top);
  final_norm_ = top;
  Add("model.norm.weight", 0, {D}, &top);
  if (!d.tied) {
    lm_head_ = top;
    Add("lm_head.weight", 0, {V, D}, &top);
  }
  buffer_sizes_.push_back(top);
  for (int l = 0; l < d.layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    const int b = 1 + l;
    int64_t c = 0;
    layer_.attn_norm = c;
    Add(p + "input_layernorm.weight", b, {D}, &c);
    layer_.wqkv = c;
    Add(p + "self_attn.q_proj.weight", b, {H * hd, D}, &c);
    Add(p + "self_attn.k_proj.weight", b, {Hkv * hd, D}, &c);
    Add(p + "self_attn.v_proj.weight", b, {Hkv * hd, D}, &c);
    layer_.wo = c;
    Add(p + "self_attn.o_proj.weight", b, {D, H * hd}, &c);
    layer_.q_norm = layer_.k_norm = -1;
    if (d.qk_norm) {
      layer_.q_norm = c;
      Add(p + "self_attn.q_norm.weight", b, {hd}, &c);
      layer_.k_norm = c;
      Add(p + "self_attn.k_norm.weight", b, {hd}, &c);
    }
    layer_.mlp_norm = c;
    Add(p + "post_attention_layernorm.weight", b, {D}, &c);
    layer_.w_gate_up = c;
    Add(p + "mlp.gate_proj.weight", b, {F, D}, &c);
    Add(p + "mlp.up_proj.weight", b, {F, D}, &c);
    layer_.w_down = c;
    Add(p + "mlp.down_proj.weight", b, {D, F}, &c);
    buffer_sizes_.push_back(c);
  }
}

int64_t ParamLayout::total() const {
  int64_t n = 0;
  for (int64_t s : buffer_sizes_) n += s;
  return n;
}

int ParamLayout::Find(const std::string& name) const {
  for (size_t i = 0; i < slices_.size(); ++i)
    if (slices_[i].name == name) return static_cast<int>(i);
  return -1;
}

ElementRange ShardOf(int64_t n, int rank, int world) {
  CHECK(world >= 1 && rank >= 0 && rank < world) << "ShardOf: rank " << rank << " of world " << world;
  const int64_t base = n / world, extra = n % world;
  ElementRange r;
  r.begin = rank * base + std::min<int64_t>(rank, extra);
  r.end = r.begin + base + (rank < extra ? 1 : 0);
  return r;
}

ParamStore::ParamStore(const ParamLayout* layout, Backend* backend, DType dtype, bool allocate)
    : layout_(layout), backend_(backend), dtype_(dtype) {
  buffers_.resize(layout->num_buffers());
  if (allocate)
    for (int b = 0; b < layout->num_buffers(); ++b) Allocate(b);
}

void ParamStore::Allocate(int b) {
  if (buffers_[b].data() != nullptr) return;
  buffers_[b] = DeviceBuffer(backend_, static_cast<size_t>(layout_->buffer_size(b)) * DTypeSize(dtype_));
}

void ParamStore::Release(int b) { buffers_[b].Reset(); }

int64_t ParamStore::allocated_bytes() const {
  int64_t n = 0;
  for (const DeviceBuffer& d : buffers_) n += static_cast<int64_t>(d.bytes());
  return n;
}

Tensor ParamStore::buffer(int b) const {
  CHECK(allocated(b)) << "ParamStore: buffer " << b << " is released (allocate it before use)";
  return Tensor(buffers_[b].data(), dtype_, {layout_->buffer_size(b)}, backend_->device());
}

Tensor ParamStore::at(int b, int64_t offset, std::initializer_list<int64_t> shape) const {
  CHECK(allocated(b)) << "ParamStore: buffer " << b << " is released (allocate it before use)";
  char* base = static_cast<char*>(buffers_[b].data()) + offset * DTypeSize(dtype_);
  Tensor t(base, dtype_, shape, backend_->device());
  CHECK_LE(offset + t.numel(), layout_->buffer_size(b));
  return t;
}

Tensor ParamStore::slice(int index) const {
  const ParamSlice& s = layout_->slices()[index];
  if (s.shape.size() == 1) return at(s.buffer, s.offset, {s.shape[0]});
  return at(s.buffer, s.offset, {s.shape[0], s.shape[1]});
}

void ParamStore::Zero() {
  for (int b = 0; b < layout_->num_buffers(); ++b)
    if (allocated(b)) backend_->Fill(buffer(b), 0.0);
}

double ParamStore::SumSquares() const {
  double s = 0;
  for (int b = 0; b < layout_->num_buffers(); ++b)
    if (allocated(b)) s += backend_->SumSquares(buffer(b));
  return s;
}

void ParamStore::CopyFromHost(int b, const void* src) { backend_->CopyFromHost(buffer(b), src); }
void ParamStore::CopyToHost(int b, void* dst) const { backend_->CopyToHost(dst, buffer(b)); }

}  // namespace longctx
