// Why: context parallelism runs a world of dp × C ranks as groups — the C
// ranks of a row pass K/V blocks around a ring (SendRecv) and sum among
// themselves, the dp ranks of a position in their groups sum gradients — so
// Split must give each rank the right partners and SendRecv must deliver each
// block to exactly the neighbour it was meant for. This program runs under
// `mpirun -np N` from ctest with --cp C (N = dp × C): it splits the world into
// cp groups (color rank / C) and dp groups (color rank % C), passes
// rank-tagged blocks around each cp ring and each dp ring, and checks every
// received value against the global rank it must have come from, and every
// group sum against the members that must have taken part. Like
// communicator_mpi_check it is not a gtest: a failed check calls AbortJob, so
// no rank is left waiting. Without a launcher (--cp 1) it checks the Local
// communicator's Split and SendRecv.
//
//   communicator_groups_mpi_check --cp=C [--expect=mpi|local]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "launch/communicator.h"
#include "launch/mpi_communicator.h"

namespace longctx {
namespace {

int64_t g_checks = 0;

void Fail(const Communicator& c, const std::string& what) {
  AbortJob(absl::InternalError(absl::StrFormat("check failed on %s: %s", c.Where(), what)));
}

void Ok(const Communicator& c, const absl::Status& st, const char* what) {
  if (!st.ok()) Fail(c, absl::StrFormat("%s: %s", what, st.ToString()));
  ++g_checks;
}

// Exact in float: a global rank's value at index i.
float Fill(int global_rank, int64_t i) { return static_cast<float>((global_rank + 1) * 1000 + (i % 997)); }

std::unique_ptr<Communicator> SplitOrDie(Communicator& c, int color, int key) {
  absl::StatusOr<std::unique_ptr<Communicator>> s = c.Split(color, key);
  if (!s.ok()) Fail(c, "Split: " + s.status().ToString());
  ++g_checks;
  return std::move(*s);
}

// A ring over `g` whose members are the global ranks members[0..size): each
// step sends the block held to the next rank and receives the previous one's;
// after step s a rank holds the block of member (rank − s) mod size.
void CheckRing(Communicator& g, const std::vector<int>& members, int64_t n) {
  const int size = g.world_size(), r = g.rank(), next = (r + 1) % size, prev = (r + size - 1) % size;
  std::vector<float> held(n), incoming(n);
  for (int64_t i = 0; i < n; ++i) held[i] = Fill(members[r], i);
  for (int step = 1; step < size; ++step) {
    Ok(g, g.SendRecv(held.data(), n, next, incoming.data(), n, prev, DType::kF32), "ring SendRecv");
    held.swap(incoming);
    const int from = members[(r - step + size * 4) % size];
    for (int64_t i = 0; i < n; ++i)
      if (held[i] != Fill(from, i))
        Fail(g, absl::StrFormat("ring of %d elements, step %d: [%d] = %g, expected global rank %d's %g", n, step, i,
                                held[i], from, Fill(from, i)));
  }
  // Unequal counts: member k sends 3(k+1) elements; a zero-count side too (a
  // rank with nothing to send still receives).
  auto count_of = [](int k) { return k == 1 ? int64_t{0} : int64_t{3} * (k + 1); };
  std::vector<float> out(count_of(r)), in(count_of(prev), -1.f);
  for (int64_t i = 0; i < count_of(r); ++i) out[i] = Fill(members[r], i);
  Ok(g, g.SendRecv(out.data(), count_of(r), next, in.data(), count_of(prev), prev, DType::kF32),
     "ring SendRecv, unequal counts");
  for (int64_t i = 0; i < count_of(prev); ++i)
    if (in[i] != Fill(members[prev], i)) Fail(g, absl::StrFormat("unequal-count ring: [%d] = %g", i, in[i]));
  // Other element types travel bit for bit (bf16 K/V blocks, int32 ids).
  std::vector<uint16_t> b16(5), b16_in(5);
  std::vector<int32_t> i32(4), i32_in(4);
  for (int i = 0; i < 5; ++i) b16[i] = static_cast<uint16_t>(0x3f80 + members[r] * 16 + i);
  for (int i = 0; i < 4; ++i) i32[i] = -members[r] * 100 - i;
  Ok(g, g.SendRecv(b16.data(), 5, next, b16_in.data(), 5, prev, DType::kBF16), "bf16 SendRecv");
  Ok(g, g.SendRecv(i32.data(), 4, next, i32_in.data(), 4, prev, DType::kI32), "i32 SendRecv");
  for (int i = 0; i < 5; ++i)
    if (b16_in[i] != static_cast<uint16_t>(0x3f80 + members[prev] * 16 + i)) Fail(g, "bf16 SendRecv value");
  for (int i = 0; i < 4; ++i)
    if (i32_in[i] != -members[prev] * 100 - i) Fail(g, "i32 SendRecv value");
  // To itself: a copy.
  std::vector<float> self_in(n);
  std::vector<float> self_out(n);
  for (int64_t i = 0; i < n; ++i) self_out[i] = Fill(members[r], i);
  Ok(g, g.SendRecv(self_out.data(), n, r, self_in.data(), n, r, DType::kF32), "SendRecv to itself");
  if (self_in != self_out) Fail(g, "SendRecv to itself: not a copy");
}

// Sums within g equal the sum over exactly its members.
void CheckGroupSums(Communicator& g, const std::vector<int>& members, int global_rank) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{4099}}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = Fill(global_rank, i);
    Ok(g, g.AllReduceSum(Tensor(x.data(), DType::kF32, {n})), "AllReduceSum(tensor) in a group");
    for (int64_t i = 0; i < n; ++i) {
      float want = 0;
      for (int m : members) want += Fill(m, i);
      if (x[i] != want) Fail(g, absl::StrFormat("group AllReduceSum[%d] = %g, expected %g", i, x[i], want));
    }
  }
  double d[2] = {1.0 * global_rank, 1.0};
  Ok(g, g.AllReduceSum(d, 2), "AllReduceSum(double) in a group");
  double want = 0;
  for (int m : members) want += m;
  if (d[0] != want || d[1] != static_cast<double>(members.size())) Fail(g, "group AllReduceSum(double)");
  int64_t mx = global_rank;
  Ok(g, g.AllReduceMax(&mx, 1), "AllReduceMax in a group");
  if (mx != members.back()) Fail(g, absl::StrFormat("group max %d, expected %d", mx, members.back()));
}

void CheckErrors(Communicator& c) {
  float x = 1, y = 0;
  absl::Status st = c.SendRecv(&x, 1, c.world_size(), &y, 1, 0, DType::kF32);
  if (!absl::IsInvalidArgument(st) || st.message().find("dest") == std::string::npos)
    Fail(c, "SendRecv to a rank outside the world: " + st.ToString());
  st = c.SendRecv(&x, 1, 0, &y, 1, -1, DType::kF32);
  if (!absl::IsInvalidArgument(st) || st.message().find("source") == std::string::npos)
    Fail(c, "SendRecv from rank -1: " + st.ToString());
  st = c.SendRecv(nullptr, 3, 0, &y, 1, 0, DType::kF32);
  if (!absl::IsInvalidArgument(st)) Fail(c, "SendRecv of a null buffer: " + st.ToString());
  float both[4] = {};
  st = c.SendRecv(both, 3, c.rank(), both + 1, 3, c.rank(), DType::kF32);
  if (!absl::IsInvalidArgument(st) || st.message().find("overlap") == std::string::npos)
    Fail(c, "SendRecv of overlapping buffers: " + st.ToString());
  absl::StatusOr<std::unique_ptr<Communicator>> s = c.Split(-1, 0);
  if (s.ok() || !absl::IsInvalidArgument(s.status())) Fail(c, "Split with a negative color");
  g_checks += 5;
}

void RunAll(Communicator& world, int C, const std::string& expect) {
  const int W = world.world_size(), R = world.rank();
  if (world.name() != expect) Fail(world, "communicator is " + world.name() + ", expected " + expect);
  if (W % C != 0) Fail(world, absl::StrFormat("--cp %d does not divide the world of %d", C, W));
  const int dp_index = R / C, cp_index = R % C;
  // The cp group of a row: ranks dp_index*C .. dp_index*C + C-1; the dp group: ranks cp_index, cp_index + C, ...
  std::unique_ptr<Communicator> cp = SplitOrDie(world, dp_index, cp_index);
  std::unique_ptr<Communicator> dp = SplitOrDie(world, cp_index, dp_index);
  std::vector<int> cp_members, dp_members;
  for (int k = 0; k < C; ++k) cp_members.push_back(dp_index * C + k);
  for (int k = 0; k < W / C; ++k) dp_members.push_back(k * C + cp_index);
  if (cp->world_size() != C || cp->rank() != cp_index || cp->name() != world.name())
    Fail(*cp, absl::StrFormat("cp group rank %d/%d, expected %d/%d", cp->rank(), cp->world_size(), cp_index, C));
  if (dp->world_size() != W / C || dp->rank() != dp_index)
    Fail(*dp, absl::StrFormat("dp group rank %d/%d, expected %d/%d", dp->rank(), dp->world_size(), dp_index, W / C));
  if (cp->local_world_size() != C || cp->local_rank() != cp_index) Fail(*cp, "cp group's local rank (one node)");
  // A key that reverses the order ranks the group by key.
  std::unique_ptr<Communicator> reversed = SplitOrDie(world, dp_index, C - 1 - cp_index);
  if (reversed->rank() != C - 1 - cp_index) Fail(*reversed, "Split does not rank by key");

  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, (int64_t{1} << 16) + 3}) {
    CheckRing(*cp, cp_members, n);
    CheckRing(*dp, dp_members, n);
  }
  // Sums within each group, across groups, and over the world, interleaved:
  // the communicators carry their own traffic.
  CheckGroupSums(*cp, cp_members, R);
  CheckGroupSums(*dp, dp_members, R);
  std::vector<int> all;
  for (int k = 0; k < W; ++k) all.push_back(k);
  CheckGroupSums(world, all, R);
  CheckGroupSums(*cp, cp_members, R);
  // A split of a split: the cp group halved by parity (where C > 1).
  std::unique_ptr<Communicator> half = SplitOrDie(*cp, cp_index % 2, cp_index);
  std::vector<int> half_members;
  for (int k = cp_index % 2; k < C; k += 2) half_members.push_back(dp_index * C + k);
  if (half->world_size() != static_cast<int>(half_members.size())) Fail(*half, "split of a split: size");
  CheckGroupSums(*half, half_members, R);
  CheckRing(*half, half_members, 9);
  CheckErrors(*cp);
  CheckErrors(world);
  // The groups outlive the communicator they were split from.
  if (expect == "mpi") {
    MpiOptions options;
    options.max_count = 7;  // every SendRecv in 7-element chunks, as counts above INT_MAX would be
    absl::StatusOr<std::unique_ptr<Communicator>> chunked = MakeMpiCommunicator(options);
    if (!chunked.ok()) AbortJob(chunked.status());
    std::unique_ptr<Communicator> chunked_cp = SplitOrDie(**chunked, dp_index, cp_index);
    chunked->reset();
    CheckRing(*chunked_cp, cp_members, 29);
    CheckRing(*chunked_cp, cp_members, 7);
    CheckGroupSums(*chunked_cp, cp_members, R);
  }
  Ok(world, world.Barrier(), "Barrier");
}

}  // namespace
}  // namespace longctx

int main(int argc, char** argv) {
  using namespace longctx;
  std::string expect = "mpi";
  int cp = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--expect=", 0) == 0) {
      expect = a.substr(9);
    } else if (a.rfind("--cp=", 0) == 0) {
      cp = std::atoi(a.c_str() + 5);
    } else {
      cp = 0;
      break;
    }
  }
  if (cp < 1) {
    std::fprintf(stderr, "usage: %s --cp=C [--expect=mpi|local]\n", argv[0]);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator();
  if (!comm.ok()) AbortJob(comm.status());
  RunAll(**comm, cp, expect);
  std::printf("communicator_groups_mpi_check: %s rank %d/%d (cp %d): %lld checks passed\n", (*comm)->name().c_str(),
              (*comm)->rank(), (*comm)->world_size(), cp, static_cast<long long>(g_checks));
  return 0;
}
