// Why: a rank of a new world reads only the ranges it needs from a checkpoint
// of either layout (one full copy, or one shard file per rank of the world
// that saved it). That mapping — which file holds which elements, the offsets
// inside a shard's tensors and inside a full copy's Hugging Face tensors — is
// checked here against a naive reference (the values the files were written
// from) on random ranges of random data, with uneven shard boundaries that
// cut tensors in the middle. Also: a manifest whose ranges leave a gap or
// overlap, or that describes another model, is refused; a corrupt shard is
// an error naming it; FilesFor names only the files a range touches.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "model/config.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "tests/support/test_seed.h"
#include "tests/support/test_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_reader.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/safetensors.h"
#include "train/config_loader.h"

namespace longctx {
namespace {

using ::longctx::testing::SourcePath;
using ::longctx::testing::TempDir;

constexpr CheckpointPart kParts[] = {CheckpointPart::kParams, CheckpointPart::kExpAvg, CheckpointPart::kExpAvgSq};

class CheckpointReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TrainConfig> c = LoadTrainConfig(SourcePath("configs/tiny-test.textproto"), {});
    ASSERT_TRUE(c.ok()) << c.status();
    config_ = *c;
    absl::StatusOr<ModelDims> d = ResolveModelConfig(config_.model());
    ASSERT_TRUE(d.ok()) << d.status();
    dims_ = *d;
    layout_ = std::make_unique<ParamLayout>(dims_);
    std::mt19937_64 rng(test::FreshSeed(12));
    std::normal_distribution<float> normal;
    for (CheckpointPart p : kParts) {
      auto& bufs = values_[static_cast<int>(p)];
      for (int b = 0; b < layout_->num_buffers(); ++b) {
        bufs.emplace_back(layout_->buffer_size(b));
        for (float& v : bufs.back()) v = normal(rng);
      }
    }
  }
  const std::vector<float>& Values(CheckpointPart p, int b) { return values_[static_cast<int>(p)][b]; }

  // A sharded checkpoint of `world` shards with random (uneven, non-empty)
  // boundaries per buffer; returns the directory.
  std::string WriteSharded(const std::string& name, int world, std::mt19937_64& rng) {
    const std::string dir = tmp_ / name;
    std::filesystem::create_directories(dir);
    // cuts[b]: world + 1 boundaries.
    std::vector<std::vector<int64_t>> cuts;
    for (int b = 0; b < layout_->num_buffers(); ++b) {
      std::vector<int64_t> c = {0, layout_->buffer_size(b)};
      std::uniform_int_distribution<int64_t> pick(1, layout_->buffer_size(b) - 1);
      std::set<int64_t> inner;
      while (static_cast<int>(inner.size()) < world - 1) inner.insert(pick(rng));
      c.insert(c.begin() + 1, inner.begin(), inner.end());
      cuts.push_back(c);
    }
    std::map<std::string, FileDigest> digests;
    nlohmann::json shards = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      std::vector<SafetensorsEntry> entries;
      nlohmann::json ranges = nlohmann::json::array();
      for (int b = 0; b < layout_->num_buffers(); ++b) {
        const int64_t lo = cuts[b][r], hi = cuts[b][r + 1];
        ranges.push_back({b, lo, hi});
        for (CheckpointPart p : kParts) {
          SafetensorsEntry e;
          e.name = ShardTensorName(p, b, lo, hi);
          e.shape = {hi - lo};
          e.data = Values(p, b).data() + lo;
          entries.push_back(e);
        }
      }
      const std::string file = ShardFileName(r, world);
      EXPECT_TRUE(WriteSafetensors(dir + "/" + file, entries, {}).ok());
      digests[file] = *HashFile(dir + "/" + file);
      shards.push_back({{"file", file}, {"rank", r}, {"ranges", ranges}});
    }
    std::vector<int64_t> sizes;
    for (int b = 0; b < layout_->num_buffers(); ++b) sizes.push_back(layout_->buffer_size(b));
    layout_json_ = {{"kind", "sharded"}, {"world_size", world}, {"buffer_sizes", sizes},
                    {"parts", {"params", "exp_avg", "exp_avg_sq"}}, {"shards", shards}};
    digests_ = digests;
    EXPECT_TRUE(WriteManifest(dir, 1, world, FSDP, layout_json_, digests).ok());
    return dir;
  }

  // Random ranges of every part compared with the values written.
  void CheckRandomRanges(CheckpointReader& r, std::mt19937_64& rng, int n) {
    for (int i = 0; i < n; ++i) {
      const CheckpointPart p = kParts[rng() % 3];
      const int b = static_cast<int>(rng() % layout_->num_buffers());
      const int64_t size = layout_->buffer_size(b);
      int64_t lo = static_cast<int64_t>(rng() % size), hi = static_cast<int64_t>(rng() % (size + 1));
      if (lo > hi) std::swap(lo, hi);
      std::vector<float> got(hi - lo, -7.0f);
      ASSERT_TRUE(r.ReadRange(p, b, lo, hi, got.data()).ok()) << CheckpointPartName(p) << " " << b;
      const std::vector<float>& want = Values(p, b);
      for (int64_t k = lo; k < hi; ++k)
        ASSERT_EQ(got[k - lo], want[k]) << CheckpointPartName(p) << " buffer " << b << " element " << k;
    }
  }

  TempDir tmp_;
  TrainConfig config_;
  ModelDims dims_;
  std::unique_ptr<ParamLayout> layout_;
  std::vector<std::vector<float>> values_[3];
  nlohmann::json layout_json_;
  std::map<std::string, FileDigest> digests_;
};

TEST_F(CheckpointReaderTest, ShardedRangesMatchTheValuesWritten) {
  std::mt19937_64 rng(test::FreshSeed(5));
  for (int world : {1, 3, 4}) {
    const std::string dir = WriteSharded(absl::StrCat("w", world), world, rng);
    absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(dir, *layout_);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->sharded());
    EXPECT_EQ(r->saved_world(), world);
    EXPECT_TRUE(r->Verify(r->FilesFor(WholeBuffers(*layout_), true, true)).ok());
    CheckRandomRanges(*r, rng, 300);
    // A range inside one shard's piece names that file only; a whole buffer all of them.
    const nlohmann::json& first = layout_json_["shards"][0]["ranges"][0];
    const int64_t lo = first[1].get<int64_t>(), hi = first[2].get<int64_t>();
    EXPECT_EQ(r->FilesFor(CheckpointPart::kParams, 0, lo, hi), std::vector<std::string>{ShardFileName(0, world)});
    EXPECT_EQ(r->FilesFor(CheckpointPart::kParams, 0, 0, layout_->buffer_size(0)).size(), static_cast<size_t>(world));
  }
}

// The full layout (SaveCheckpoint's model.safetensors + optimizer.safetensors
// with Hugging Face names): random ranges cross tensor boundaries.
TEST_F(CheckpointReaderTest, FullCopyRangesMatchTheValuesWritten) {
  absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu", BackendSettings{});
  ASSERT_TRUE(be.ok());
  Transformer t(dims_, be->get(), DType::kF32);
  AdamW opt(&t.layout(), be->get(), DType::kF32, AdamWSettings{});
  for (int b = 0; b < layout_->num_buffers(); ++b) {
    t.params().CopyFromHost(b, Values(CheckpointPart::kParams, b).data());
    opt.m().CopyFromHost(b, Values(CheckpointPart::kExpAvg, b).data());
    opt.v().CopyFromHost(b, Values(CheckpointPart::kExpAvgSq, b).data());
  }
  absl::StatusOr<std::string> dir =
      SaveCheckpoint(tmp_ / "full", 1, config_, t, &opt, nlohmann::json{{"step", 1}}, 0, 1, 2);
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(*dir, *layout_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->sharded());
  std::mt19937_64 rng(test::FreshSeed(7));
  CheckRandomRanges(*r, rng, 300);
  // And into a strategy-like shard of views (the Load path).
  std::vector<float> p(100), m(100), v(100);
  const int64_t lo = layout_->buffer_size(1) - 100;
  std::vector<CheckpointShard> shards = {{1, lo, lo + 100, Tensor(p.data(), DType::kF32, {100}, Device::kCpu),
                                          Tensor(m.data(), DType::kF32, {100}, Device::kCpu),
                                          Tensor(v.data(), DType::kF32, {100}, Device::kCpu)}};
  ASSERT_TRUE(r->Load(shards, true, true, **be).ok());
  for (int k = 0; k < 100; ++k) {
    ASSERT_EQ(p[k], Values(CheckpointPart::kParams, 1)[lo + k]);
    ASSERT_EQ(v[k], Values(CheckpointPart::kExpAvgSq, 1)[lo + k]);
  }
}

TEST_F(CheckpointReaderTest, ManifestThatDoesNotTileOrFitIsRefused) {
  std::mt19937_64 rng(test::FreshSeed(9));
  const std::string dir = WriteSharded("bad", 3, rng);
  auto rewrite = [&](const nlohmann::json& lay) { ASSERT_TRUE(WriteManifest(dir, 1, 3, FSDP, lay, digests_).ok()); };
  nlohmann::json gap = layout_json_;
  gap["shards"][1]["ranges"][0][1] = gap["shards"][1]["ranges"][0][1].get<int64_t>() + 1;
  rewrite(gap);
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(dir, *layout_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(r.status().message()).find("leave a gap"), std::string::npos) << r.status();
  nlohmann::json overlap = layout_json_;
  overlap["shards"][1]["ranges"][0][1] = overlap["shards"][1]["ranges"][0][1].get<int64_t>() - 1;
  rewrite(overlap);
  r = CheckpointReader::Open(dir, *layout_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("overlap"), std::string::npos) << r.status();
  nlohmann::json other = layout_json_;
  other["buffer_sizes"][0] = other["buffer_sizes"][0].get<int64_t>() + 8;
  rewrite(other);
  r = CheckpointReader::Open(dir, *layout_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(r.status().message()).find("different model"), std::string::npos) << r.status();
  // A corrupt shard: Verify names it.
  rewrite(layout_json_);
  const std::string victim = dir + "/" + ShardFileName(2, 3);
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  r = CheckpointReader::Open(dir, *layout_);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::Status st = r->Verify(r->FilesFor(WholeBuffers(*layout_), true, false));
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(st.message()).find(victim + ": corrupt checkpoint file"), std::string::npos) << st;
}

}  // namespace
}  // namespace longctx
