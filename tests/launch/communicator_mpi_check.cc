// Why: the communicators are only right if every collective gives, on every
// rank, the value each rank can compute by itself from the rank-dependent fills
// all ranks used. This program runs under `mpirun -np N` from ctest (N = 1..4;
// 3 gives uneven shards), and once without a launcher (the Local communicator).
// It is not a gtest: a mismatch on one rank calls AbortJob, which ends every
// rank at once with that rank's message — a failing check cannot leave its
// peers waiting in the next collective.
//
//   communicator_mpi_check [--expect=mpi|local]
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "launch/communicator.h"
#include "launch/mpi_communicator.h"

namespace longctx {
namespace {

int64_t g_checks = 0;

#define EXPECT_OK(expr)                                                                                   \
  do {                                                                                                    \
    absl::Status _st = (expr);                                                                            \
    if (!_st.ok())                                                                                        \
      AbortJob(absl::InternalError(absl::StrFormat("%s:%d: %s failed: %s", __FILE__, __LINE__, #expr,     \
                                                   _st.ToString())));                                      \
    ++g_checks;                                                                                           \
  } while (0)

void Fail(const Communicator& c, const std::string& what) {
  AbortJob(absl::InternalError(absl::StrFormat("check failed on %s: %s", c.Where(), what)));
}

// Exactly representable in float for every rank and index, so sums in any
// order are exact and comparisons can be ==.
float Fill(int rank, int64_t i) { return static_cast<float>((rank + 1) * ((i % 1009) + 1)); }
float FillSum(int world, int64_t i) { return static_cast<float>(world * (world + 1) / 2 * ((i % 1009) + 1)); }

const int64_t kSizes[] = {0, 1, 7, (int64_t{1} << 20) + 3};

void CheckIdentity(Communicator& c, const std::string& expect) {
  if (c.name() != expect) Fail(c, "communicator is " + c.name() + ", expected " + expect);
  if (c.rank() < 0 || c.rank() >= c.world_size()) Fail(c, "rank outside the world");
  if (const char* env = std::getenv("OMPI_COMM_WORLD_SIZE"); env != nullptr && std::atoi(env) != c.world_size())
    Fail(c, absl::StrFormat("world size %d, mpirun says %s", c.world_size(), env));
  if (const char* env = std::getenv("OMPI_COMM_WORLD_RANK"); env != nullptr && std::atoi(env) != c.rank())
    Fail(c, absl::StrFormat("rank %d, mpirun says %s", c.rank(), env));
  // All ranks of these tests run on one node.
  if (c.local_world_size() != c.world_size() || c.local_rank() != c.rank())
    Fail(c, absl::StrFormat("local rank %d/%d on a one-node job", c.local_rank(), c.local_world_size()));
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"); env != nullptr && std::atoi(env) != c.local_rank())
    Fail(c, absl::StrFormat("local rank %d, mpirun says %s", c.local_rank(), env));
}

void CheckAllReduce(Communicator& c) {
  const int r = c.rank(), w = c.world_size();
  for (int64_t n : kSizes) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = Fill(r, i);
    EXPECT_OK(c.AllReduceSum(Tensor(x.data(), DType::kF32, {n})));
    for (int64_t i = 0; i < n; ++i)
      if (x[i] != FillSum(w, i))
        Fail(c, absl::StrFormat("AllReduceSum(tensor of %d)[%d] = %g, expected %g", n, i, x[i], FillSum(w, i)));
    // A 2-D tensor sums the same way.
    if (n == 7) {
      std::vector<double> d(14);
      for (int i = 0; i < 14; ++i) d[i] = 0.5 * (r + 1) * (i + 1);
      EXPECT_OK(c.AllReduceSum(Tensor(d.data(), DType::kF64, {2, 7})));
      for (int i = 0; i < 14; ++i)
        if (d[i] != 0.5 * w * (w + 1) / 2 * (i + 1)) Fail(c, absl::StrFormat("AllReduceSum(f64 tensor)[%d]", i));
    }
  }
  // Doubles: the original overload, then max / min with a rank-dependent maximum place.
  std::vector<double> d = {1.0 * r, 0.25, -1.0 * r};
  EXPECT_OK(c.AllReduceSum(d.data(), 3));
  if (d[0] != w * (w - 1) / 2.0 || d[1] != 0.25 * w || d[2] != -w * (w - 1) / 2.0)
    Fail(c, absl::StrFormat("AllReduceSum(double) = %g %g %g", d[0], d[1], d[2]));
  std::vector<double> mx = {1.0 * r, -1.0 * r, r == w - 1 ? 1e300 : 0.0};
  std::vector<double> mn = mx;
  EXPECT_OK(c.AllReduceMax(mx.data(), 3));
  EXPECT_OK(c.AllReduceMin(mn.data(), 3));
  if (mx[0] != w - 1 || mx[1] != 0 || mx[2] != 1e300)
    Fail(c, absl::StrFormat("AllReduceMax(double) = %g %g %g", mx[0], mx[1], mx[2]));
  if (mn[0] != 0 || mn[1] != -(w - 1) || mn[2] != (w == 1 ? 1e300 : 0.0))
    Fail(c, absl::StrFormat("AllReduceMin(double) = %g %g %g", mn[0], mn[1], mn[2]));
  // int64: values beyond double's 53-bit mantissa must survive exactly.
  const int64_t big = (int64_t{1} << 60) + 1;
  std::vector<int64_t> s = {big + r, r, -r};
  std::vector<int64_t> m1 = s, m2 = s;
  EXPECT_OK(c.AllReduceSum(s.data(), 2));  // the third element must stay untouched
  if (s[0] != big * w + int64_t{w} * (w - 1) / 2 || s[1] != int64_t{w} * (w - 1) / 2 || s[2] != -r)
    Fail(c, absl::StrFormat("AllReduceSum(int64) = %" PRId64 " %" PRId64 " %" PRId64, s[0], s[1], s[2]));
  EXPECT_OK(c.AllReduceMax(m1.data(), 3));
  EXPECT_OK(c.AllReduceMin(m2.data(), 3));
  if (m1[0] != big + w - 1 || m1[1] != w - 1 || m1[2] != 0) Fail(c, "AllReduceMax(int64)");
  if (m2[0] != big || m2[1] != 0 || m2[2] != -(w - 1)) Fail(c, "AllReduceMin(int64)");
}

void CheckShards(Communicator& c) {
  const int r = c.rank(), w = c.world_size();
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{7}, (int64_t{1} << 20) + 3}) {
    const IndexRange mine = ShardRange(n, r, w);
    // Reduce-scatter: my shard is the sum over ranks of the fills at my indices.
    std::vector<float> full(n), shard(mine.size() + 1, -7.0f);  // one guard element
    for (int64_t i = 0; i < n; ++i) full[i] = Fill(r, i);
    const std::vector<float> full_before = full;
    EXPECT_OK(c.ReduceScatterSum(full.data(), n, shard.data()));
    for (int64_t i = 0; i < mine.size(); ++i)
      if (shard[i] != FillSum(w, mine.begin + i))
        Fail(c, absl::StrFormat("ReduceScatterSum(%d)[%d] = %g, expected %g", n, mine.begin + i, shard[i],
                                FillSum(w, mine.begin + i)));
    if (shard[mine.size()] != -7.0f) Fail(c, absl::StrFormat("ReduceScatterSum(%d) wrote past the shard", n));
    if (full != full_before) Fail(c, absl::StrFormat("ReduceScatterSum(%d) modified its input", n));

    // Reduce-scatter of doubles (grad_sum_fp64): values no float can hold,
    // summed exactly (every partial sum is representable in double).
    {
      const double tiny = std::ldexp(1.0, -30);  // sums < 2^14: 44 significant bits, exact in double
      std::vector<double> f64(n), s64(mine.size() + 1, -7.0);
      for (int64_t i = 0; i < n; ++i) f64[i] = Fill(r, i) + (r + 1) * tiny;
      EXPECT_OK(c.ReduceScatterSum(f64.data(), n, s64.data()));
      for (int64_t i = 0; i < mine.size(); ++i) {
        const double want = static_cast<double>(FillSum(w, mine.begin + i)) + w * (w + 1) / 2 * tiny;
        if (s64[i] != want)
          Fail(c, absl::StrFormat("ReduceScatterSum(double, %d)[%d] = %.17g, expected %.17g", n, mine.begin + i,
                                  s64[i], want));
      }
      if (s64[mine.size()] != -7.0) Fail(c, absl::StrFormat("ReduceScatterSum(double, %d) wrote past the shard", n));
    }

    // All-gather (separate buffers): every element comes from its owner.
    std::vector<float> gathered(n, -1.0f);
    std::vector<float> mine_vals(mine.size());
    for (int64_t i = 0; i < mine.size(); ++i) mine_vals[i] = Fill(r, mine.begin + i);
    EXPECT_OK(c.AllGather(mine_vals.data(), n, gathered.data()));
    for (int64_t i = 0; i < n; ++i)
      if (gathered[i] != Fill(ShardOwner(n, i, w), i))
        Fail(c, absl::StrFormat("AllGather(%d)[%d] = %g, expected %g from rank %d", n, i, gathered[i],
                                Fill(ShardOwner(n, i, w), i), ShardOwner(n, i, w)));

    // Reduce-scatter then all-gather in place equals all-reduce.
    std::vector<float> reduced = full;
    EXPECT_OK(c.AllReduceSum(Tensor(reduced.data(), DType::kF32, {n})));
    std::vector<float> rs_ag(n, -3.0f);
    if (mine.size() > 0) std::memcpy(rs_ag.data() + mine.begin, shard.data(), mine.size() * sizeof(float));
    EXPECT_OK(c.AllGather(rs_ag.data() + mine.begin, n, rs_ag.data()));
    if (rs_ag != reduced) Fail(c, absl::StrFormat("AllGather(ReduceScatterSum(x)) != AllReduceSum(x) for n=%d", n));

    // bf16 and int32 gathers move bits: patterns that are not float-like.
    std::vector<uint16_t> b16(n, 0xFFFF), b16_mine(mine.size());
    for (int64_t i = 0; i < mine.size(); ++i) b16_mine[i] = static_cast<uint16_t>((mine.begin + i) * 31 + r);
    EXPECT_OK(c.AllGather(b16_mine.data(), n, DType::kBF16, b16.data()));
    for (int64_t i = 0; i < n; ++i)
      if (b16[i] != static_cast<uint16_t>(i * 31 + ShardOwner(n, i, w)))
        Fail(c, absl::StrFormat("AllGather(bf16, %d)[%d] = %d", n, i, b16[i]));
    std::vector<int32_t> i32(n, 0);
    for (int64_t i = mine.begin; i < mine.end; ++i) i32[i] = static_cast<int32_t>(-i - 1000 * r);
    EXPECT_OK(c.AllGather(i32.data() + mine.begin, n, DType::kI32, i32.data()));
    for (int64_t i = 0; i < n; ++i)
      if (i32[i] != -i - 1000 * ShardOwner(n, i, w)) Fail(c, absl::StrFormat("AllGather(i32, %d)[%d]", n, i));
  }
}

void CheckBroadcast(Communicator& c) {
  const int r = c.rank(), w = c.world_size();
  for (int root = 0; root < w; ++root) {
    for (int64_t n : kSizes) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = Fill(r, i);
      EXPECT_OK(c.Broadcast(Tensor(x.data(), DType::kF32, {n}), root));
      for (int64_t i = 0; i < n; ++i)
        if (x[i] != Fill(root, i)) Fail(c, absl::StrFormat("Broadcast(%d, root %d)[%d] = %g", n, root, i, x[i]));
    }
    for (int64_t nbytes : {int64_t{0}, int64_t{13}, int64_t{3} << 20}) {
      std::string bytes(nbytes, static_cast<char>('a' + r));
      EXPECT_OK(c.BroadcastBytes(bytes.data(), nbytes, root));
      if (bytes != std::string(nbytes, static_cast<char>('a' + root)))
        Fail(c, absl::StrFormat("BroadcastBytes(%d, root %d)", nbytes, root));
    }
  }
  EXPECT_OK(c.Barrier());
}

void CheckAgreement(Communicator& c) {
  const int r = c.rank(), w = c.world_size();
  absl::StatusOr<bool> all = c.AllAgree(true);
  if (!all.ok() || !*all) Fail(c, "AllAgree(true on every rank) is not true");
  // Each rank in turn says no: everybody must hear it.
  for (int dissenter = 0; dissenter < w; ++dissenter) {
    absl::StatusOr<bool> agreed = c.AllAgree(r != dissenter);
    if (!agreed.ok()) Fail(c, agreed.status().ToString());
    if (*agreed) Fail(c, absl::StrFormat("AllAgree is true although rank %d said no", dissenter));
  }
}

// Bad arguments fail locally, alike on every rank, with the rank in the message.
void CheckErrors(Communicator& c) {
  const std::string where = absl::StrFormat("rank %d/%d", c.rank(), c.world_size());
  auto expect_error = [&](absl::Status st, absl::StatusCode code, const std::string& what) {
    if (st.code() != code || st.message().find(where) == std::string::npos)
      Fail(c, absl::StrFormat("%s: expected %s naming \"%s\", got %s", what, absl::StatusCodeToString(code), where,
                              st.ToString()));
  };
  float f = 0;
  expect_error(c.Broadcast(Tensor(&f, DType::kF32, {1}), c.world_size()), absl::StatusCode::kInvalidArgument,
               "Broadcast from a root outside the world");
  expect_error(c.BroadcastBytes(&f, 4, -1), absl::StatusCode::kInvalidArgument, "BroadcastBytes from root -1");
  expect_error(c.AllReduce(static_cast<double*>(nullptr), 3, ReduceOp::kSum), absl::StatusCode::kInvalidArgument,
               "AllReduce on a null buffer");
  expect_error(c.ReduceScatterSum(&f, -1, &f), absl::StatusCode::kInvalidArgument, "ReduceScatterSum of -1");
  if (c.name() == "mpi") {
    uint16_t h = 0;
    expect_error(c.AllReduceSum(Tensor(&h, DType::kBF16, {1})), absl::StatusCode::kInvalidArgument,
                 "AllReduceSum on bf16");
    expect_error(c.AllReduceSum(Tensor(&f, DType::kF32, {1}, Device::kCuda)), absl::StatusCode::kInvalidArgument,
                 "AllReduceSum on a CUDA tensor");
    std::vector<float> buf(16);
    expect_error(c.ReduceScatterSum(buf.data(), 16, buf.data()), absl::StatusCode::kInvalidArgument,
                 "ReduceScatterSum with the shard inside the input");
    expect_error(c.ReduceScatterSum(buf.data(), 16, DType::kI32, buf.data() + 0), absl::StatusCode::kInvalidArgument,
                 "ReduceScatterSum of int32");
    // MPI_THREAD_FUNNELED: a call from another thread is refused, not undefined.
    absl::Status from_thread;
    std::thread t([&] { from_thread = c.Barrier(); });
    t.join();
    expect_error(from_thread, absl::StatusCode::kFailedPrecondition, "Barrier from a non-main thread");
  }
  ++g_checks;
}

void RunAll(Communicator& c, const std::string& expect) {
  CheckIdentity(c, expect);
  CheckAllReduce(c);
  CheckShards(c);
  CheckBroadcast(c);
  CheckAgreement(c);
  CheckErrors(c);
}

}  // namespace
}  // namespace longctx

int main(int argc, char** argv) {
  using namespace longctx;
  std::string expect = "mpi";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--expect=", 0) == 0) {
      expect = a.substr(9);
    } else {
      std::fprintf(stderr, "usage: %s [--expect=mpi|local]\n", argv[0]);
      return 2;
    }
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator();
  if (!comm.ok()) AbortJob(comm.status());
  RunAll(**comm, expect);
  if (expect == "local") {
    // Without a launcher the factory must not have touched MPI.
    if (MpiIsActive()) Fail(**comm, "MPI was initialized although no launcher started this process");
  } else {
    // Again through a communicator that chunks every collective at 1000
    // elements (and odd 7), as counts above INT_MAX are: same answers.
    for (int64_t max_count : {int64_t{1000}, int64_t{7}}) {
      MpiOptions options;
      options.max_count = max_count;
      absl::StatusOr<std::unique_ptr<Communicator>> chunked = MakeMpiCommunicator(options);
      if (!chunked.ok()) AbortJob(chunked.status());
      if (max_count == 7) {
        // Small sizes only: 7-element chunks of a million would take minutes.
        CheckAgreement(**chunked);
        std::vector<float> full(29), shard(ShardRange(29, (*chunked)->rank(), (*chunked)->world_size()).size());
        for (int i = 0; i < 29; ++i) full[i] = Fill((*chunked)->rank(), i);
        EXPECT_OK((*chunked)->ReduceScatterSum(full.data(), 29, shard.data()));
        const IndexRange mine = ShardRange(29, (*chunked)->rank(), (*chunked)->world_size());
        for (int64_t i = 0; i < mine.size(); ++i)
          if (shard[i] != FillSum((*chunked)->world_size(), mine.begin + i)) Fail(**chunked, "chunked(7) reduce-scatter");
        EXPECT_OK((*chunked)->AllGather(shard.data(), 29, full.data()));
        for (int i = 0; i < 29; ++i)
          if (full[i] != FillSum((*chunked)->world_size(), i)) Fail(**chunked, "chunked(7) all-gather");
      } else {
        RunAll(**chunked, "mpi");
      }
    }
  }
  std::printf("communicator_mpi_check: %s: %" PRId64 " checks passed\n", (*comm)->Where().c_str(), g_checks);
  return 0;
}
