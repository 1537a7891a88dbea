// Why: the CPU backend is the reference every other backend must agree with
// (backend.h). This test runs every Backend op, in F32 and F64, on fresh
// random inputs through the backend under test — inputs copied to its memory
// as row-strided views padded with a sentinel, results copied back — and
// compares them with the CPU backend run on dense host copies of the same
// inputs (relative tolerance ~1e-4 in F32, ~1e-10 in F64). It also checks that
// no op writes into the padding and that the ops that reduce (SumSquares,
// embedding/RMSNorm/attention backward, the LM-head loss) give bitwise
// identical results when repeated.
//
// It is parameterised over the backend names MakeBackend knows ("cpu",
// "cuda"); one that is absent (not built, or no GPU) is skipped with the
// reason. The "cpu" instance compares a second CPU backend, driven through the
// Backend interface with strided views, against the dense reference, so it
// asserts stride handling, padding safety and determinism even on a machine
// without a GPU.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/math/bf16.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"
#include "tests/support/backend_twin.h"
#include "tests/support/test_seed.h"
#include "tests/support/hardware_skip.h"

namespace longctx {
namespace {

using backend_twin::DTypeOf;
using backend_twin::Draw;
using backend_twin::ExpectBitwiseEqual;
using backend_twin::ExpectClose;
using backend_twin::ExpectRelNear;
using backend_twin::Ints;
using backend_twin::MakeTensor;
using backend_twin::RelativeError;
using backend_twin::Tol;
using backend_twin::Twin;

// ---------------------------------------------------------------------------

template <class T>
void CheckElementwise(Backend* b, Backend* ref, std::mt19937& rng) {
  const std::vector<int64_t> shape = {7, 3, 11};
  const double tol = Tol<T>();
  {
    Twin<T> x(b, shape, 5);
    x.Random(rng).Upload();
    ref->Fill(x.ref(), 0.37);
    b->Fill(x.dev(), 0.37);
    ExpectClose(x.Download(), x.host(), 0.0, "Fill");
  }
  {
    Twin<T> x(b, shape, 5);
    x.Random(rng).Upload();
    ref->Scale(x.ref(), -1.7);
    b->Scale(x.dev(), -1.7);
    ExpectClose(x.Download(), x.host(), tol, "Scale");
  }
  for (int64_t x_pad : {0, 2}) {  // strided y with a dense or a strided x
    Twin<T> y(b, shape, 5), x(b, shape, x_pad);
    y.Random(rng).Upload();
    x.Random(rng).Upload();
    ref->Axpy(y.ref(), 0.6, x.ref());
    b->Axpy(y.dev(), 0.6, x.dev());
    ExpectClose(y.Download(), y.host(), tol, "Axpy");
  }
  {
    Twin<T> dst(b, shape, 2), src(b, shape, 3);
    dst.Random(rng).Upload();
    src.Random(rng).Upload();
    ref->Copy(dst.ref(), src.ref());
    b->Copy(dst.dev(), src.dev());
    ExpectClose(dst.Download(), dst.host(), 0.0, "Copy");
  }
  {
    using Other = std::conditional_t<sizeof(T) == 4, double, float>;
    Twin<Other> dst(b, shape, 1);
    Twin<T> src(b, shape, 4);
    dst.Random(rng).Upload();
    src.Random(rng).Upload();
    ref->Copy(dst.ref(), src.ref());
    b->Copy(dst.dev(), src.dev());
    ExpectClose(dst.Download(), dst.host(), 0.0, "Copy (dtype conversion)");
  }
  {
    Twin<T> x(b, shape, 5);
    x.Random(rng).Upload();
    const double want = ref->SumSquares(x.ref());
    ExpectRelNear(b->SumSquares(x.dev()), want, 1e-12, "SumSquares (strided)");
    Twin<T> big(b, {100003}, 0);  // several reduction blocks
    big.Random(rng).Upload();
    const double got = b->SumSquares(big.dev());
    ExpectRelNear(got, ref->SumSquares(big.ref()), 1e-12, "SumSquares (dense)");
    EXPECT_EQ(got, b->SumSquares(big.dev())) << "SumSquares is not deterministic";
  }
  {
    Twin<T> x(b, shape, 5);
    x.Random(rng).Upload(std::numeric_limits<T>::quiet_NaN());  // padding is not part of the tensor
    EXPECT_TRUE(ref->AllFinite(x.ref()));
    EXPECT_TRUE(b->AllFinite(x.dev())) << "AllFinite looked at the padding";
    x.host()[40] = std::numeric_limits<T>::infinity();
    x.Upload();
    EXPECT_FALSE(ref->AllFinite(x.ref()));
    EXPECT_FALSE(b->AllFinite(x.dev())) << "AllFinite missed +inf";
    x.host()[40] = T(1);
    x.host()[230] = std::numeric_limits<T>::quiet_NaN();
    x.Upload();
    EXPECT_FALSE(b->AllFinite(x.dev())) << "AllFinite missed NaN";
  }
}

// A BF16 output of `b` (dense, in `dev`) against the reference's bits: the
// F32 values may differ in their last bits, so their roundings by one bf16
// step at most.
void ExpectBf16Close(Backend* b, const DeviceBuffer& dev, const std::vector<uint16_t>& want_bits,
                     const std::string& what) {
  std::vector<uint16_t> got_bits(want_bits.size());
  b->CopyToHost(got_bits.data(), MakeTensor(dev.data(), DType::kBF16, {static_cast<int64_t>(got_bits.size())},
                                            b->device(), 0));
  std::vector<float> want(want_bits.size()), got(want_bits.size());
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = math::Bf16BitsToF32(want_bits[i]), got[i] = math::Bf16BitsToF32(got_bits[i]);
  ExpectClose(got, want, 1.0 / 128, what);
}

// One op on both backends with its output `out` (a member of the params)
// made BF16 of `shape` (the output only bf16 products read), compared.
template <class Params, class Run>
void CheckBf16Output(Backend* b, Backend* ref, Params pr, Params pd, Tensor Params::*out,
                     const std::vector<int64_t>& shape, Run run, const std::string& what) {
  int64_t count = 1;
  for (int64_t s : shape) count *= s;
  std::vector<uint16_t> r16(count);
  DeviceBuffer d16(b, static_cast<size_t>(count) * 2);
  pr.*out = MakeTensor(r16.data(), DType::kBF16, shape, Device::kCpu, 0);
  pd.*out = MakeTensor(d16.data(), DType::kBF16, shape, b->device(), 0);
  run(ref, pr);
  run(b, pd);
  ExpectBf16Close(b, d16, r16, what);
}

template <class T>
void CheckGemm(Backend* b, Backend* ref, std::mt19937& rng) {
  const int64_t m = 37, n = 29, k = 45;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (double beta : {0.0, 0.3}) {
        const std::string what = "Gemm trans_a=" + std::to_string(ta) + " trans_b=" + std::to_string(tb) +
                                 " beta=" + std::to_string(beta);
        Twin<T> a(b, ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, 3);
        Twin<T> bm(b, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, 2);
        Twin<T> c(b, {m, n}, 4);
        a.Random(rng).Upload();
        bm.Random(rng).Upload();
        c.Random(rng).Upload();
        GemmParams pr, pd;
        pr.a = a.ref(), pr.b = bm.ref(), pr.c = c.ref();
        pd.a = a.dev(), pd.b = bm.dev(), pd.c = c.dev();
        for (GemmParams* p : {&pr, &pd}) {
          p->trans_a = ta;
          p->trans_b = tb;
          p->alpha = 0.7;
          p->beta = beta;
        }
        ref->Gemm(pr);
        b->Gemm(pd);
        ExpectClose(c.Download(), c.host(), Tol<T>(), what);
      }
}

// F32 only: a product with a BF16 operand (GemmParams), the bf16 copy made by
// each backend's own Copy from the same strided F32 values; the other operand
// F32 (rounded inside Gemm) or BF16 too. A bf16 product on both sides: they
// differ only in fp32 summation order.
void CheckGemmBf16Operands(Backend* b, Backend* ref, std::mt19937& rng) {
  const int64_t m = 37, n = 29, k = 45;
  for (int ta = 0; ta < 2; ++ta)
    for (int both = 0; both < 2; ++both) {
      const std::string what = "Gemm with BF16 a, trans_a=" + std::to_string(ta) + (both ? ", BF16 b" : ", F32 b");
      const std::vector<int64_t> a_shape = ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
      Twin<float> a(b, a_shape, 3), bm(b, {k, n}, 2), c(b, {m, n}, 4);
      a.Random(rng).Upload();
      bm.Random(rng).Upload();
      c.Random(rng).Upload();
      DeviceBuffer a16(b, static_cast<size_t>(m * k) * 2), b16(b, static_cast<size_t>(k * n) * 2);
      std::vector<uint16_t> a16_host(m * k), b16_host(k * n);
      const Tensor ar = MakeTensor(a16_host.data(), DType::kBF16, a_shape, Device::kCpu, 0);
      const Tensor ad = MakeTensor(a16.data(), DType::kBF16, a_shape, b->device(), 0);
      const Tensor br = MakeTensor(b16_host.data(), DType::kBF16, {k, n}, Device::kCpu, 0);
      const Tensor bd = MakeTensor(b16.data(), DType::kBF16, {k, n}, b->device(), 0);
      ref->Copy(ar, a.ref());
      b->Copy(ad, a.dev());
      ref->Copy(br, bm.ref());
      b->Copy(bd, bm.dev());
      GemmParams pr{.a = ar, .b = both ? br : bm.ref(), .c = c.ref(), .trans_a = ta == 1, .alpha = 0.7, .beta = 0.3};
      GemmParams pd{.a = ad, .b = both ? bd : bm.dev(), .c = c.dev(), .trans_a = ta == 1, .alpha = 0.7, .beta = 0.3};
      ref->Gemm(pr);
      b->Gemm(pd);
      ExpectClose(c.Download(), c.host(), 1e-5, what);
    }
}

template <class T>
void CheckEmbedding(Backend* b, Backend* ref, std::mt19937& rng) {
  const int64_t vocab = 50, d = 24, n = 2500;  // n > 2048: the sort's global passes run too
  std::vector<int32_t> id_values(n);
  std::uniform_int_distribution<int32_t> hot(0, 4), any(0, vocab - 1);
  std::bernoulli_distribution pick_hot(0.7);
  for (int32_t& id : id_values) id = pick_hot(rng) ? hot(rng) : any(rng);
  Ints ids(b, id_values);

  Twin<T> table(b, {vocab, d}, 3), out(b, {n, d}, 2);
  table.Random(rng).Upload();
  out.Random(rng).Upload();
  EmbeddingParams pr, pd;
  pr.ids = ids.ref(), pr.table = table.ref(), pr.out = out.ref();
  pd.ids = ids.dev(), pd.table = table.dev(), pd.out = out.dev();
  ref->EmbeddingForward(pr);
  b->EmbeddingForward(pd);
  ExpectClose(out.Download(), out.host(), 0.0, "EmbeddingForward");

  Twin<T> d_table(b, {vocab, d}, 3), d_out(b, {n, d}, 2);
  d_table.Random(rng).Upload();
  d_out.Random(rng).Upload();
  const std::vector<T> d_table0 = d_table.host();
  pr.table = d_table.ref(), pr.out = d_out.ref();
  pd.table = d_table.dev(), pd.out = d_out.dev();
  ref->EmbeddingBackward(pr);
  b->EmbeddingBackward(pd);
  const std::vector<T> first = d_table.Download();
  ExpectClose(first, d_table.host(), Tol<T>(), "EmbeddingBackward");
  std::vector<T>& h = d_table.host();
  h = d_table0;
  d_table.Upload();
  b->EmbeddingBackward(pd);
  ExpectBitwiseEqual(d_table.Download(), first, "EmbeddingBackward");
}

template <class T>
void CheckRmsNorm(Backend* b, Backend* ref, std::mt19937& rng) {
  const int64_t n = 600, d = 300;  // n > the backward's row chunks, d > a block of threads
  Twin<T> x(b, {n, d}, 3), w(b, {d}, 0), y(b, {n, d}, 2), rstd(b, {n}, 0);
  x.Random(rng, -2, 2).Upload();
  w.Random(rng, 0.5, 1.5).Upload();
  y.Random(rng).Upload();
  rstd.Random(rng).Upload();
  RmsNormParams pr, pd;
  pr.x = x.ref(), pr.weight = w.ref(), pr.y = y.ref(), pr.rstd = rstd.ref();
  pd.x = x.dev(), pd.weight = w.dev(), pd.y = y.dev(), pd.rstd = rstd.dev();
  pr.eps = pd.eps = 1e-5;
  ref->RmsNormForward(pr);
  b->RmsNormForward(pd);
  ExpectClose(y.Download(), y.host(), Tol<T>(), "RmsNormForward y");
  ExpectClose(rstd.Download(), rstd.host(), Tol<T>(), "RmsNormForward rstd");
  if constexpr (sizeof(T) == 4)  // a BF16 y (input of bf16 products)
    CheckBf16Output(
        b, ref, pr, pd, &RmsNormParams::y, {n, d}, [](Backend* be, const RmsNormParams& p) { be->RmsNormForward(p); },
        "RmsNormForward (BF16 y)");

  Twin<T> dy(b, {n, d}, 1), dx(b, {n, d}, 4), dw(b, {d}, 0);
  dy.Random(rng).Upload();
  pr.dy = dy.ref(), pr.dx = dx.ref(), pr.dweight = dw.ref();
  pd.dy = dy.dev(), pd.dx = dx.dev(), pd.dweight = dw.dev();
  for (bool accumulate : {false, true}) {
    const std::string what = accumulate ? "RmsNormBackward (accumulate dx)" : "RmsNormBackward";
    dx.Random(rng).Upload();
    dw.Random(rng).Upload();
    const std::vector<T> dx0 = dx.host(), dw0 = dw.host();
    pr.accumulate_dx = pd.accumulate_dx = accumulate;
    ref->RmsNormBackward(pr);
    b->RmsNormBackward(pd);
    const std::vector<T> got_dx = dx.Download(), got_dw = dw.Download();
    ExpectClose(got_dx, dx.host(), Tol<T>(), what + " dx");
    ExpectClose(got_dw, dw.host(), Tol<T>(), what + " dweight");
    dx.host() = dx0;
    dw.host() = dw0;
    dx.Upload();
    dw.Upload();
    b->RmsNormBackward(pd);
    ExpectBitwiseEqual(dx.Download(), got_dx, what + " dx");
    ExpectBitwiseEqual(dw.Download(), got_dw, what + " dweight");
  }
}

template <class T>
void CheckRope(Backend* b, Backend* ref, std::mt19937& rng) {
  const int64_t n = 60, heads = 3, head_dim = 16;
  // Three packed segments: 0.., a long-context run near 10^5, then a restart.
  std::vector<int32_t> pos(n);
  for (int64_t t = 0; t < n; ++t) pos[t] = t < 25 ? t : t < 45 ? 100000 + (t - 25) : (t - 45);
  Ints positions(b, pos);
  Twin<T> x(b, {n, heads, head_dim}, 5);
  x.Random(rng).Upload();
  const std::vector<T> x0 = x.host();
  RopeParams pr, pd;
  pr.x = x.ref(), pr.positions = positions.ref();
  pd.x = x.dev(), pd.positions = positions.dev();
  for (RopeParams* p : {&pr, &pd}) {
    p->theta = 10000.0;
    p->rotary_dim = 12;  // the last 4 dims of each head pass through
    p->position_scale = 0.5;
  }
  for (int direction : {1, -1}) {
    pr.direction = pd.direction = direction;
    ref->Rope(pr);
    b->Rope(pd);
    ExpectClose(x.Download(), x.host(), Tol<T>(), "Rope direction " + std::to_string(direction));
  }
  ExpectClose(x.Download(), x0, Tol<T>(), "Rope then its inverse");
}

template <class T>
void CheckSwiGlu(Backend* b, Backend* ref, std::mt19937& rng) {
  const int64_t n = 33, f = 70;
  Twin<T> gate_up(b, {n, 2 * f}, 3), h(b, {n, f}, 1), dh(b, {n, f}, 2), dgu(b, {n, 2 * f}, 5);
  gate_up.Random(rng, -4, 4).Upload();
  h.Random(rng).Upload();
  dh.Random(rng).Upload();
  dgu.Random(rng).Upload();
  SwiGluParams pr, pd;
  pr.gate_up = gate_up.ref(), pr.h = h.ref(), pr.dh = dh.ref(), pr.dgate_up = dgu.ref();
  pd.gate_up = gate_up.dev(), pd.h = h.dev(), pd.dh = dh.dev(), pd.dgate_up = dgu.dev();
  ref->SwiGluForward(pr);
  b->SwiGluForward(pd);
  ExpectClose(h.Download(), h.host(), Tol<T>(), "SwiGluForward");
  if constexpr (sizeof(T) == 4)  // a BF16 h (input of bf16 products)
    CheckBf16Output(
        b, ref, pr, pd, &SwiGluParams::h, {n, f}, [](Backend* be, const SwiGluParams& p) { be->SwiGluForward(p); },
        "SwiGluForward (BF16 h)");
  ref->SwiGluBackward(pr);
  b->SwiGluBackward(pd);
  ExpectClose(dgu.Download(), dgu.host(), Tol<T>(), "SwiGluBackward");
  if constexpr (sizeof(T) == 4)  // a BF16 dgate_up (operand of bf16 products)
    CheckBf16Output(
        b, ref, pr, pd, &SwiGluParams::dgate_up, {n, 2 * f},
        [](Backend* be, const SwiGluParams& p) { be->SwiGluBackward(p); }, "SwiGluBackward (BF16 dgate_up)");
}

template <class T>
void CheckAdamW(Backend* b, Backend* ref, std::mt19937& rng) {
  const int64_t n = 1000;
  Twin<T> param(b, {n}, 0), grad(b, {n}, 0), m(b, {n}, 0), v(b, {n}, 0);
  param.Random(rng).Upload();
  grad.Random(rng).Upload();
  m.Random(rng, -0.1, 0.1).Upload();
  v.Random(rng, 1e-4, 1e-2).Upload();
  AdamWParams pr, pd;
  pr.param = param.ref(), pr.grad = grad.ref(), pr.m = m.ref(), pr.v = v.ref();
  pd.param = param.dev(), pd.grad = grad.dev(), pd.m = m.dev(), pd.v = v.dev();
  for (AdamWParams* p : {&pr, &pd}) {
    p->lr = 1e-2;
    p->weight_decay = 0.1;
    p->grad_scale = 0.5;
    p->step = 7;
  }
  ref->AdamW(pr);
  b->AdamW(pd);
  ExpectClose(param.Download(), param.host(), Tol<T>(), "AdamW param");
  ExpectClose(m.Download(), m.host(), Tol<T>(), "AdamW m");
  ExpectClose(v.Download(), v.host(), Tol<T>(), "AdamW v");
}

template <class T>
void CheckLmHeadLoss(Backend* b, Backend* ref, std::mt19937& rng) {
  const int64_t n = 70, d = 32, vocab = 300;
  std::vector<int32_t> tgt(n);
  std::uniform_int_distribution<int32_t> any(0, vocab - 1);
  std::bernoulli_distribution ignored(0.2);
  for (int32_t& t : tgt) t = ignored(rng) ? -1 : any(rng);
  for (int64_t i = 16; i < 32; ++i) tgt[i] = -1;  // one whole chunk ignored
  Ints targets(b, tgt);
  Twin<T> x(b, {n, d}, 3), w(b, {vocab, d}, 1), dx(b, {n, d}, 2), dw(b, {vocab, d}, 0), losses(b, {n}, 0);
  x.Random(rng).Upload();
  w.Random(rng).Upload();
  dx.Random(rng).Upload();
  dw.Random(rng).Upload();
  losses.Random(rng).Upload();
  const std::vector<T> dw0 = dw.host();

  LmHeadLossParams pr, pd;
  pr.x = x.ref(), pr.weight = w.ref(), pr.targets = targets.ref(), pr.losses = losses.ref();
  pd.x = x.dev(), pd.weight = w.dev(), pd.targets = targets.dev(), pd.losses = losses.dev();
  pr.chunk_tokens = pd.chunk_tokens = 16;
  // Forward only.
  const double want_fwd = ref->LmHeadLoss(pr);
  const double got_fwd = b->LmHeadLoss(pd);
  ExpectRelNear(got_fwd, want_fwd, Tol<T>(), "LmHeadLoss (forward) loss");
  ExpectClose(losses.Download(), losses.host(), Tol<T>(), "LmHeadLoss (forward) losses");
  EXPECT_EQ(got_fwd, b->LmHeadLoss(pd)) << "LmHeadLoss is not deterministic";

  // Forward + backward.
  pr.dx = dx.ref(), pr.dweight = dw.ref();
  pd.dx = dx.dev(), pd.dweight = dw.dev();
  pr.grad_scale = pd.grad_scale = 0.25;
  const double want = ref->LmHeadLoss(pr);
  const double got = b->LmHeadLoss(pd);
  ExpectRelNear(got, want, Tol<T>(), "LmHeadLoss loss");
  ExpectRelNear(got, got_fwd, 0.0, "LmHeadLoss loss with vs without backward");
  ExpectClose(losses.Download(), losses.host(), Tol<T>(), "LmHeadLoss losses");
  const std::vector<T> got_dx = dx.Download(), got_dw = dw.Download();
  ExpectClose(got_dx, dx.host(), Tol<T>(), "LmHeadLoss dx");
  ExpectClose(got_dw, dw.host(), Tol<T>(), "LmHeadLoss dweight");
  dw.host() = dw0;
  dw.Upload();
  EXPECT_EQ(got, b->LmHeadLoss(pd)) << "LmHeadLoss is not deterministic";
  ExpectBitwiseEqual(dx.Download(), got_dx, "LmHeadLoss dx");
  ExpectBitwiseEqual(dw.Download(), got_dw, "LmHeadLoss dweight");
}

struct AttnCase {
  std::vector<int32_t> seqlens;
  int64_t heads, kv_heads, head_dim;
  int window;
  double scale;
  int64_t pad;  // row padding of q/k/v/o/d_o/dq/dk/dv
};

// The cumulative segment starts of a case's lengths: {0, l0, l0 + l1, ...}.
std::vector<int32_t> CuSeqlens(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> cu = {0};
  for (int32_t len : lengths) cu.push_back(cu.back() + len);
  return cu;
}

// One training attention case held twice: every tensor as a Twin with fresh
// random values in [-2, 2), and the params of the reference (pr, dense host
// copies) and of the backend under test (pd, padded rows in its memory).
template <class T>
struct AttnTwins {
  AttnTwins(Backend* b, const AttnCase& c, std::mt19937& rng)
      : n(CuSeqlens(c.seqlens).back()),
        cu_seqlens(b, CuSeqlens(c.seqlens)),
        q(b, {n, c.heads, c.head_dim}, c.pad),
        k(b, {n, c.kv_heads, c.head_dim}, c.pad),
        v(b, {n, c.kv_heads, c.head_dim}, c.pad),
        o(b, {n, c.heads, c.head_dim}, c.pad),
        lse(b, {c.heads, n}, 0),
        d_o(b, {n, c.heads, c.head_dim}, c.pad),
        dq(b, {n, c.heads, c.head_dim}, c.pad),
        dk(b, {n, c.kv_heads, c.head_dim}, c.pad),
        dv(b, {n, c.kv_heads, c.head_dim}, c.pad) {
    for (Twin<T>* t : {&q, &k, &v, &o, &lse, &d_o, &dq, &dk, &dv}) t->Random(rng, -2, 2).Upload();
    pr.q = q.ref(), pr.k = k.ref(), pr.v = v.ref(), pr.o = o.ref(), pr.lse = lse.ref();
    pr.d_o = d_o.ref(), pr.dq = dq.ref(), pr.dk = dk.ref(), pr.dv = dv.ref();
    pr.cu_seqlens = cu_seqlens.ref();
    pd.q = q.dev(), pd.k = k.dev(), pd.v = v.dev(), pd.o = o.dev(), pd.lse = lse.dev();
    pd.d_o = d_o.dev(), pd.dq = dq.dev(), pd.dk = dk.dev(), pd.dv = dv.dev();
    pd.cu_seqlens = cu_seqlens.dev();
    pr.window = pd.window = c.window;
    pr.scale = pd.scale = c.scale;
  }

  int64_t n;
  Ints cu_seqlens;
  Twin<T> q, k, v, o, lse, d_o, dq, dk, dv;
  AttentionParams pr, pd;
};

template <class T>
void CheckAttention(Backend* b, Backend* ref, std::mt19937& rng) {
  const std::vector<AttnCase> cases = {
      {{1, 5, 130, 1, 0, 163}, 4, 2, 24, 0, 0.0, 0},  // documents, empty and length-1 ones, GQA
      {{1, 5, 130, 1, 0, 163}, 4, 1, 16, 37, 0.0, 3},  // sliding window, one kv head, strided
      {{300}, 2, 2, 64, 0, 0.2, 5},                   // one long segment, explicit scale
      {{70, 1, 229}, 4, 2, 32, 100, 0.0, 1},          // window longer than a tile
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const AttnCase& c = cases[ci];
    const std::string what = "Attention case " + std::to_string(ci);
    AttnTwins<T> t(b, c, rng);
    Twin<T>& o = t.o;
    Twin<T>& lse = t.lse;
    Twin<T>& dq = t.dq;
    Twin<T>& dk = t.dk;
    Twin<T>& dv = t.dv;
    AttentionParams& pr = t.pr;
    AttentionParams& pd = t.pd;

    ref->AttentionForward(pr);
    b->AttentionForward(pd);
    ExpectClose(o.Download(), o.host(), Tol<T>(), what + " o");
    ExpectClose(lse.Download(), lse.host(), Tol<T>(), what + " lse");

    ref->AttentionBackward(pr);
    b->AttentionBackward(pd);
    const std::vector<T> got_dq = dq.Download(), got_dk = dk.Download(), got_dv = dv.Download();
    ExpectClose(got_dq, dq.host(), Tol<T>(), what + " dq");
    ExpectClose(got_dk, dk.host(), Tol<T>(), what + " dk");
    ExpectClose(got_dv, dv.host(), Tol<T>(), what + " dv");
    b->AttentionBackward(pd);
    ExpectBitwiseEqual(dq.Download(), got_dq, what + " dq");
    ExpectBitwiseEqual(dk.Download(), got_dk, what + " dk");
    ExpectBitwiseEqual(dv.Download(), got_dv, what + " dv");
  }
}

// Attention at precision bf16 (`b` set to MatmulPrecision::kBF16): the CPU
// backend's bf16 tiles, or the CUDA backend's tensor-core kernels for
// head_dim 32, 64 and 128 (its scalar kernels for others), against the fp32
// op of the reference. The products' operands are rounded to bf16, so the
// outputs agree with fp32 to bf16 accuracy, judged by the relative norm error
// (bound 2e-2; bf16 operands land between 1e-3 and 1e-2: the CPU at 2.1e-4
// to 4.5e-3, the H200 at 2.0e-4 to 5.1e-3). `expect_bf16_heads`: the backend
// must show that rounding (error > 1e-5; an fp32 path would be near 1e-7)
// for those head_dims, so a dispatch that silently ran fp32 fails.
// The backward is repeated and must give the same bits.
void CheckAttentionBf16(Backend* b, Backend* ref, std::mt19937& rng, bool expect_bf16_heads) {
  using T = float;
  const std::vector<AttnCase> cases = {
      {{1, 5, 130, 1, 0, 163}, 4, 2, 32, 0, 0.0, 0},  // documents, empty and length-1 ones, GQA
      {{300}, 2, 1, 64, 0, 0.2, 5},                   // one long segment, explicit scale, strided
      {{70, 1, 229}, 4, 2, 128, 100, 0.0, 1},         // window longer than a tile, head_dim 128
      {{200, 57, 3}, 2, 2, 64, 17, 0.0, 2},           // window inside a tile
      {{64, 128, 65}, 2, 1, 32, 0, 0.0, 0},           // documents on and off the 64-row tiles
      {{90}, 2, 2, 24, 0, 0.0, 0},                    // a head_dim no tensor-core kernel takes
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const AttnCase& c = cases[ci];
    const std::string what = "bf16 attention case " + std::to_string(ci) + " (head_dim " +
                             std::to_string(c.head_dim) + ")";
    AttnTwins<T> t(b, c, rng);
    ref->AttentionForward(t.pr);
    b->AttentionForward(t.pd);
    ref->AttentionBackward(t.pr);
    b->AttentionBackward(t.pd);
    const std::vector<T> got_dq = t.dq.Download(), got_dk = t.dk.Download(), got_dv = t.dv.Download();
    const std::vector<std::pair<const char*, double>> errors = {
        {"o", RelativeError(t.o.Download(), t.o.host())},
        {"lse", RelativeError(t.lse.Download(), t.lse.host())},
        {"dq", RelativeError(got_dq, t.dq.host())},
        {"dk", RelativeError(got_dk, t.dk.host())},
        {"dv", RelativeError(got_dv, t.dv.host())},
    };
    const bool tensor_core_head = c.head_dim == 32 || c.head_dim == 64 || c.head_dim == 128;
    for (const auto& [name, err] : errors) {
      EXPECT_LE(err, 2e-2) << what << " " << name << ": relative error against fp32";
      if (expect_bf16_heads && tensor_core_head && std::string(name) != "lse") {
        EXPECT_GT(err, 1e-5) << what << " " << name << ": as close as fp32, so the bf16 kernels did not run";
      }
      std::printf("%s %s: relative error %.3g against fp32\n", what.c_str(), name, err);
    }
    b->AttentionBackward(t.pd);
    ExpectBitwiseEqual(t.dq.Download(), got_dq, what + " dq");
    ExpectBitwiseEqual(t.dk.Download(), got_dk, what + " dk");
    ExpectBitwiseEqual(t.dv.Download(), got_dv, what + " dv");
  }
}

// A forward-only (inference) attention case: queries and keys with their own
// bottom-right aligned segments (lengths lq, lk), window and diagonal offset.
struct InferenceCase {
  std::vector<int32_t> lq, lk;
  int64_t heads, kv_heads, head_dim;
  int window, offset;
  int64_t pad;
};

// The inference shapes both checks run, with the head_dim of each.
std::vector<InferenceCase> InferenceCases(const std::array<int64_t, 5>& head_dims) {
  return {
      {{1}, {257}, 4, 2, head_dims[0], 0, 0, 0},                   // decode
      {{1, 1, 1}, {5, 130, 1}, 4, 1, head_dims[1], 40, 0, 3},      // decode, several sequences, window
      {{100}, {230}, 4, 2, head_dims[2], 0, 0, 1},                 // chunk after a cache
      {{70, 0, 64}, {150, 3, 70}, 2, 2, head_dims[3], 50, 10, 2},  // chunks with window and offset
      {{130, 1, 163}, {130, 1, 163}, 4, 2, head_dims[4], 0, 37, 0},  // prefill, offset (STRING part 2)
  };
}

// An inference case held twice, as AttnTwins holds a training one.
template <class T>
struct InferenceTwins {
  InferenceTwins(Backend* b, const InferenceCase& c, std::mt19937& rng)
      : nq(CuSeqlens(c.lq).back()),
        nk(CuSeqlens(c.lk).back()),
        cu_q(b, CuSeqlens(c.lq)),
        cu_k(b, CuSeqlens(c.lk)),
        q(b, {nq, c.heads, c.head_dim}, c.pad),
        k(b, {nk, c.kv_heads, c.head_dim}, c.pad),
        v(b, {nk, c.kv_heads, c.head_dim}, c.pad),
        o(b, {nq, c.heads, c.head_dim}, c.pad),
        lse(b, {c.heads, nq}, 0) {
    for (Twin<T>* t : {&q, &k, &v, &o, &lse}) t->Random(rng, -2, 2).Upload();
    pr.q = q.ref(), pr.k = k.ref(), pr.v = v.ref(), pr.o = o.ref(), pr.lse = lse.ref();
    pd.q = q.dev(), pd.k = k.dev(), pd.v = v.dev(), pd.o = o.dev(), pd.lse = lse.dev();
    pr.cu_seqlens = cu_q.ref(), pr.cu_seqlens_k = cu_k.ref();
    pd.cu_seqlens = cu_q.dev(), pd.cu_seqlens_k = cu_k.dev();
    pr.window = pd.window = c.window;
    pr.diagonal_offset = pd.diagonal_offset = c.offset;
  }

  int64_t nq, nk;
  Ints cu_q, cu_k;
  Twin<T> q, k, v, o, lse;
  AttentionParams pr, pd;
};

// Rows that see no key have lse = -inf and must match exactly; the finite
// rest is returned (got, want) for a tolerance check.
template <class T>
std::pair<std::vector<T>, std::vector<T>> SplitLse(const std::vector<T>& got, const std::vector<T>& want,
                                                   const std::string& what) {
  std::vector<T> finite_got, finite_want;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " lse " << i;
    } else {
      finite_got.push_back(got[i]), finite_want.push_back(want[i]);
    }
  }
  return {finite_got, finite_want};
}

// The forward-only inference generalisation (keys with their own bottom-right
// aligned segments, a diagonal offset) and the log-sum-exp merge, including
// rows that see no key (lse = -inf) and rows empty in both merged parts.
template <class T>
void CheckAttentionInference(Backend* b, Backend* ref, std::mt19937& rng) {
  const std::vector<InferenceCase> cases = InferenceCases({32, 16, 24, 16, 16});
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const std::string what = "Inference attention case " + std::to_string(ci);
    InferenceTwins<T> t(b, cases[ci], rng);
    ref->AttentionForward(t.pr);
    b->AttentionForward(t.pd);
    ExpectClose(t.o.Download(), t.o.host(), Tol<T>(), what + " o");
    const auto [finite_got, finite_want] = SplitLse(t.lse.Download(), t.lse.host(), what);
    ExpectClose(finite_got, finite_want, Tol<T>(), what + " lse");
  }
  {
    const int64_t n = 37, h = 3, d = 20;
    Twin<T> o1(b, {n, h, d}, 2), o2(b, {n, h, d}, 0), lse1(b, {h, n}, 0), lse2(b, {h, n}, 0), o(b, {n, h, d}, 1),
        lse(b, {h, n}, 0);
    for (Twin<T>* t : {&o1, &o2, &lse1, &lse2, &o, &lse}) t->Random(rng, -3, 3);
    const T inf = std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < 5; ++i) {  // part 1 empty, part 2 empty, both empty
      lse1.host()[0 * n + i] = -inf;
      lse2.host()[1 * n + i] = -inf;
      lse1.host()[2 * n + i] = lse2.host()[2 * n + i] = -inf;
    }
    for (Twin<T>* t : {&o1, &o2, &lse1, &lse2, &o, &lse}) t->Upload();
    AttentionMergeParams pr, pd;
    pr.o1 = o1.ref(), pr.o2 = o2.ref(), pr.lse1 = lse1.ref(), pr.lse2 = lse2.ref(), pr.o = o.ref(), pr.lse = lse.ref();
    pd.o1 = o1.dev(), pd.o2 = o2.dev(), pd.lse1 = lse1.dev(), pd.lse2 = lse2.dev(), pd.o = o.dev(), pd.lse = lse.dev();
    ref->AttentionMerge(pr);
    b->AttentionMerge(pd);
    ExpectClose(o.Download(), o.host(), Tol<T>(), "AttentionMerge o");
    const std::vector<T> got = lse.Download();
    for (size_t i = 0; i < got.size(); ++i)
      if (std::isinf(lse.host()[i])) {
        EXPECT_EQ(got[i], lse.host()[i]) << "AttentionMerge lse " << i;
      } else {
        EXPECT_NEAR(got[i], lse.host()[i], Tol<T>() * (1 + std::fabs(lse.host()[i]))) << "AttentionMerge lse " << i;
      }
    // In place (o = o1, lse = lse1), as STRING runs it.
    pr.o = pr.o1, pr.lse = pr.lse1, pd.o = pd.o1, pd.lse = pd.lse1;
    ref->AttentionMerge(pr);
    b->AttentionMerge(pd);
    ExpectClose(o1.Download(), o1.host(), Tol<T>(), "AttentionMerge in place o");
  }
}

// The inference forms (keys of their own, windows, diagonal offsets, rows
// that see nothing) at precision bf16, against the reference's fp32 op, as
// CheckAttentionBf16 judges the training form; head_dims the tensor-core
// kernels take. The CPU's bf16 driver takes training calls only, so on the
// cpu instance these run its fp32 tiles and agree exactly; on cuda they run
// the tensor-core forward (scripts/gpu_check.sh runs the cuda instance on a
// machine with a GPU).
void CheckAttentionInferenceBf16(Backend* b, Backend* ref, std::mt19937& rng, bool expect_bf16_heads) {
  const std::vector<InferenceCase> cases = InferenceCases({64, 32, 64, 32, 128});
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const std::string what = "bf16 inference attention case " + std::to_string(ci);
    InferenceTwins<float> t(b, cases[ci], rng);
    ref->AttentionForward(t.pr);
    b->AttentionForward(t.pd);
    const double o_err = RelativeError(t.o.Download(), t.o.host());
    const auto [finite_got, finite_want] = SplitLse(t.lse.Download(), t.lse.host(), what);
    const double lse_err = RelativeError(finite_got, finite_want);
    EXPECT_LE(o_err, 2e-2) << what << " o: relative error against fp32";
    EXPECT_LE(lse_err, 2e-2) << what << " lse: relative error against fp32";
    if (expect_bf16_heads) {
      EXPECT_GT(o_err, 1e-5) << what << " o: as close as fp32, so the bf16 kernels did not run";
    }
    std::printf("%s o: relative error %.3g, lse %.3g against fp32\n", what.c_str(), o_err, lse_err);
  }
}

template <class T>
void CheckAllOps(Backend* b, Backend* ref, uint32_t seed) {
  std::mt19937 rng(test::FreshSeed(seed));
  {
    SCOPED_TRACE("elementwise");
    CheckElementwise<T>(b, ref, rng);
  }
  {
    SCOPED_TRACE("gemm");
    CheckGemm<T>(b, ref, rng);
    if constexpr (sizeof(T) == 4) CheckGemmBf16Operands(b, ref, rng);
  }
  {
    SCOPED_TRACE("embedding");
    CheckEmbedding<T>(b, ref, rng);
  }
  {
    SCOPED_TRACE("rmsnorm");
    CheckRmsNorm<T>(b, ref, rng);
  }
  {
    SCOPED_TRACE("rope");
    CheckRope<T>(b, ref, rng);
  }
  {
    SCOPED_TRACE("swiglu");
    CheckSwiGlu<T>(b, ref, rng);
  }
  {
    SCOPED_TRACE("adamw");
    CheckAdamW<T>(b, ref, rng);
  }
  {
    SCOPED_TRACE("lm_head_loss");
    CheckLmHeadLoss<T>(b, ref, rng);
  }
  {
    SCOPED_TRACE("attention");
    CheckAttention<T>(b, ref, rng);
  }
  {
    SCOPED_TRACE("attention inference and merge");
    CheckAttentionInference<T>(b, ref, rng);
  }
}

class BackendConsistencyTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> b = MakeBackend(GetParam());
    if (!b.ok()) {
      // Only the CUDA backend may be missing, and only for want of a device.
      if (GetParam() == "cuda") LONGCTX_SKIP_WITHOUT(::longctx::test::kNoCudaDevice) << "backend 'cuda' is not available here: " << b.status();
      GTEST_SKIP() << "backend '" << GetParam() << "' is not available here: " << b.status();
    }
    backend_ = std::move(*b);
    reference_ = MakeCpuBackend();
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> reference_;
};

TEST_P(BackendConsistencyTest, EveryOpMatchesCpuBackend) {
  EXPECT_EQ(backend_->name(), GetParam());
  {
    SCOPED_TRACE("F32");
    CheckAllOps<float>(backend_.get(), reference_.get(), 1234);
  }
  {
    SCOPED_TRACE("F64");
    CheckAllOps<double>(backend_.get(), reference_.get(), 5678);
  }
}

// The bf16 attention kernels (precision bf16), training and inference forms,
// against the reference's fp32 op; on the cuda instance these are the
// tensor-core kernels.
TEST_P(BackendConsistencyTest, Bf16AttentionMatchesF32Reference) {
  ASSERT_TRUE(backend_->SetMatmulPrecision(MatmulPrecision::kBF16).ok());
  std::mt19937 rng(test::FreshSeed(4321));
  CheckAttentionBf16(backend_.get(), reference_.get(), rng, GetParam() == "cuda");
  CheckAttentionInferenceBf16(backend_.get(), reference_.get(), rng, GetParam() == "cuda");
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendConsistencyTest, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace longctx
