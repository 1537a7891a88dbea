// Why: the loss-by-position probe (train/probe/loss_by_position*.h) is only
// worth reading if each bucket holds exactly the losses it claims: the
// per-token losses of one forward pass over documents laid out as segments,
// bucketed, must equal a naive recomputation — each document alone through
// ForwardLogits, −log softmax in double, a plain loop over its positions —
// with exact token and document counts, documents that end inside a bucket
// left out of it, and positions counted from each document's start (the later
// documents of a row are where a row-start count goes wrong). Random,
// perturbed weights of a model with RoPE and NoPE layers.
#include "train/probe/loss_by_position.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "kernels/backend_registry.h"
#include "model/config.h"
#include "tests/support/memory_documents.h"
#include "tests/support/small_model.h"
#include "train/device_batch.h"
#include "train/probe/loss_by_position_probe.h"
#include "train/report/run_plots.h"

namespace longctx {
namespace {

constexpr int kVocab = 97;

class LossByPositionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu");
    ASSERT_TRUE(be.ok()) << be.status();
    backend_ = std::move(*be);
    ModelConfig m = testing::SmallTestModelConfig(4, 2, RNOPE_SWA, /*qk_norm=*/false, /*roper=*/false);
    absl::StatusOr<ModelDims> dims = ResolveModelConfig(m);
    ASSERT_TRUE(dims.ok()) << dims.status();
    model_ = std::make_unique<Transformer>(*dims, backend_.get(), DType::kF32);
    model_->InitParams(5);
    std::mt19937 rng(6);
    std::normal_distribution<float> n(0.f, 0.3f);
    for (int b = 0; b < model_->layout().num_buffers(); ++b) {
      float* p = model_->params().buffer(b).as<float>();
      for (int64_t i = 0; i < model_->layout().buffer_size(b); ++i) p[i] += n(rng);
    }
  }

  static std::vector<std::vector<int32_t>> RandomDocs(const std::vector<int>& lengths, uint64_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
    std::vector<std::vector<int32_t>> docs;
    for (int n : lengths) {
      docs.emplace_back(n);
      for (int32_t& t : docs.back()) t = id(rng);
    }
    return docs;
  }

  // The losses of one document alone: positions 0..n-2, from its logits.
  std::vector<double> NaiveDocLosses(const std::vector<int32_t>& doc) {
    const int64_t T = static_cast<int64_t>(doc.size()) - 1, V = kVocab;
    const std::vector<float> logits =
        testing::OneSegmentLogits(*model_, std::vector<int32_t>(doc.begin(), doc.end() - 1));
    std::vector<double> out(T);
    for (int64_t t = 0; t < T; ++t) {
      const float* row = logits.data() + t * V;
      double mx = row[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
      double z = 0;
      for (int64_t v = 0; v < V; ++v) z += std::exp(row[v] - mx);
      out[t] = -(row[doc[t + 1]] - mx - std::log(z));
    }
    return out;
  }

  // Buckets filled by a plain loop over documents (each cut to max_len + 1 tokens).
  LossByPosition Naive(const std::vector<std::vector<int32_t>>& docs, int64_t L, int64_t max_len) {
    absl::StatusOr<LossByPosition> r = MakeLossByPositionBuckets(L, max_len);
    EXPECT_TRUE(r.ok());
    for (const std::vector<int32_t>& full : docs) {
      std::vector<int32_t> doc(full.begin(), full.begin() + std::min<int64_t>(full.size(), max_len + 1));
      const std::vector<double> losses = NaiveDocLosses(doc);
      for (PositionBucket& b : r->buckets) {
        if (static_cast<int64_t>(losses.size()) < b.hi) continue;
        b.docs += 1;
        for (int64_t p = b.lo; p < b.hi; ++p) b.loss_sum += losses[p], b.tokens += 1;
      }
      r->documents += 1;
    }
    return *r;
  }

  static void ExpectSame(const LossByPosition& got, const LossByPosition& want) {
    ASSERT_EQ(got.buckets.size(), want.buckets.size());
    EXPECT_EQ(got.documents, want.documents);
    for (size_t k = 0; k < want.buckets.size(); ++k) {
      const PositionBucket &g = got.buckets[k], &w = want.buckets[k];
      SCOPED_TRACE(::testing::Message() << "bucket [" << w.lo << ", " << w.hi << ")");
      EXPECT_EQ(g.lo, w.lo);
      EXPECT_EQ(g.hi, w.hi);
      EXPECT_EQ(g.tokens, w.tokens);
      EXPECT_EQ(g.docs, w.docs);
      EXPECT_NEAR(g.loss_sum, w.loss_sum, 1e-4 * std::max(1.0, std::abs(w.loss_sum)));
    }
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Transformer> model_;
};

TEST(LossByPositionBuckets, EdgesAreEighthsOfLThenDoublingToMaxLen) {
  absl::StatusOr<LossByPosition> r = MakeLossByPositionBuckets(256, 1024);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const PositionBucket& b : r->buckets) got.emplace_back(b.lo, b.hi);
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{
                     {0, 32}, {32, 64}, {64, 128}, {128, 256}, {256, 512}, {512, 1024}}));
  // max_len no power-of-two multiple of L: the last bucket ends at max_len.
  r = MakeLossByPositionBuckets(16, 40);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->buckets.back().lo, 32);
  EXPECT_EQ(r->buckets.back().hi, 40);
  // A tiny L: empty edges dropped, max_len == L allowed.
  r = MakeLossByPositionBuckets(4, 4);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->buckets.size(), 3u);
  EXPECT_EQ(r->buckets[0].hi, 1);
  EXPECT_EQ(r->buckets[2].lo, 2);
  EXPECT_EQ(r->buckets[2].hi, 4);
  EXPECT_FALSE(MakeLossByPositionBuckets(0, 8).ok());
  EXPECT_FALSE(MakeLossByPositionBuckets(16, 15).ok());
}

TEST_F(LossByPositionTest, OneForwardOverSegmentsMatchesEachDocumentAlone) {
  constexpr int64_t L = 16, kMax = 64;
  // Lengths (tokens) around the bucket edges 2, 4, 8, 16, 32, 64 (+1: n tokens
  // give n - 1 loss positions), one longer than kMax + 1 that gets cut.
  const std::vector<int> lengths = {33, 9, 65, 17, 40, 100, 16, 3};
  std::vector<std::vector<int32_t>> docs = RandomDocs(lengths, 7);
  for (std::vector<int32_t>& d : docs)
    if (static_cast<int64_t>(d.size()) > kMax + 1) d.resize(kMax + 1);
  absl::StatusOr<PackedBatch> batch = DocumentsAsSegments(docs);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(ValidatePackedBatch(*batch).ok());
  ASSERT_EQ(batch->cu_seqlens.size(), docs.size() + 1);
  DeviceBatch device_batch(backend_.get());
  const int64_t n = batch->seq_len;
  std::vector<float> losses(n);
  BatchTensors t = device_batch.Upload(*batch);
  const Tensor loss_tensor(losses.data(), DType::kF32, {n});
  model_->ForwardBackward(t, 0.0, /*backward=*/false, &loss_tensor);
  absl::StatusOr<LossByPosition> got = MakeLossByPositionBuckets(L, kMax);
  ASSERT_TRUE(got.ok());
  std::vector<double> host(losses.begin(), losses.end());
  ASSERT_TRUE(AddBatchLossesByPosition(*batch, host, &*got).ok());
  const LossByPosition want = Naive(docs, L, kMax);
  ExpectSame(*got, want);
  // Counts by hand: loss positions 32, 8, 64, 16, 39, 64, 15, 2; buckets
  // [0,2) [2,4) [4,8) [8,16) [16,32) [32,64): a document is in a bucket when
  // its positions reach hi.
  const std::vector<int64_t> docs_in = {8, 7, 7, 5, 4, 2};
  for (size_t k = 0; k < docs_in.size(); ++k) {
    EXPECT_EQ(got->buckets[k].docs, docs_in[k]) << k;
    EXPECT_EQ(got->buckets[k].tokens, docs_in[k] * (got->buckets[k].hi - got->buckets[k].lo)) << k;
  }
  EXPECT_EQ(got->documents, 8);
}

TEST_F(LossByPositionTest, RunOverADocumentSourceMatchesNaive) {
  constexpr int64_t L = 16, kMax = 48;
  const std::vector<int> lengths = {10, 30, 80, 17, 49, 16, 60, 25};
  const std::vector<std::vector<int32_t>> docs = RandomDocs(lengths, 8);
  testing::MemoryDocuments source(docs, kVocab);
  std::vector<uint32_t> all(docs.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint32_t>(i);
  const std::vector<uint32_t> picked = LongDocuments(source, all, L, /*max_docs=*/5);
  EXPECT_EQ(picked, (std::vector<uint32_t>{1, 2, 3, 4, 6}));  // longer than L, first 5
  // Small forwards: several groups, one document alone in its forward.
  LossByPositionSettings s{.train_len = L, .max_len = kMax, .max_docs = 5, .tokens_per_forward = 60};
  DeviceBatch device_batch(backend_.get());
  absl::StatusOr<LossByPosition> got = RunLossByPosition(*model_, device_batch, source, picked, s);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<std::vector<int32_t>> picked_docs;
  for (uint32_t d : picked) picked_docs.push_back(docs[d]);
  ExpectSame(*got, Naive(picked_docs, L, kMax));
  EXPECT_EQ(got->buckets.back().docs, 3);  // 80, 49, 60 tokens reach position 47
  const nlohmann::json ev = LossByPositionEvent(*got, 12);
  EXPECT_EQ(ev["kind"], "loss_by_position");
  EXPECT_EQ(ev["buckets"].size(), got->buckets.size());
  EXPECT_EQ(ev["buckets"][0]["tokens"], got->buckets[0].tokens);
}

TEST_F(LossByPositionTest, EmptyBucketIsNullInTheEvent) {
  absl::StatusOr<LossByPosition> r = MakeLossByPositionBuckets(8, 32);
  ASSERT_TRUE(r.ok());
  const nlohmann::json ev = LossByPositionEvent(*r, 0);
  EXPECT_TRUE(ev["buckets"][0]["loss"].is_null());
  EXPECT_TRUE(std::isnan(r->buckets[0].mean()));
}

TEST(LossByPositionPlot, DrawsMeasuredBucketsAndRefusesNone) {
  absl::StatusOr<LossByPosition> r = MakeLossByPositionBuckets(8, 32);
  ASSERT_TRUE(r.ok());
  const nlohmann::json empty = LossByPositionEvent(*r, 3);
  EXPECT_TRUE(absl::IsNotFound(LossByPositionPlotPng({&empty}, "t").status()));
  r->buckets[0].loss_sum = 2.0, r->buckets[0].tokens = 1, r->buckets[0].docs = 1;
  r->buckets[1].loss_sum = 3.0, r->buckets[1].tokens = 2, r->buckets[1].docs = 1;
  const nlohmann::json ev = LossByPositionEvent(*r, 3);
  absl::StatusOr<std::string> png = LossByPositionPlotPng({&ev}, "t");
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(png->substr(0, 4), "\x89PNG");
}

TEST(LossByPositionBatch, RefusesPackedDocumentsAndGaps) {
  absl::StatusOr<LossByPosition> r = MakeLossByPositionBuckets(4, 8);
  ASSERT_TRUE(r.ok());
  absl::StatusOr<PackedBatch> b = DocumentsAsSegments({{1, 2, 3, 4, 5}, {6, 7, 8}});
  ASSERT_TRUE(b.ok());
  std::vector<double> loss(b->seq_len, 1.0);
  // Two documents in one segment: positions do not restart.
  PackedBatch merged = *b;
  merged.cu_seqlens = {0, merged.seq_len};
  absl::Status st = AddBatchLossesByPosition(merged, loss, &*r);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("token 4 of segment 0 is at position 0"), std::string::npos) << st;
  PackedBatch gap = *b;
  gap.targets[2] = -1;
  st = AddBatchLossesByPosition(gap, loss, &*r);
  EXPECT_NE(st.message().find("token 2 of segment 0 has no target"), std::string::npos) << st;
  st = AddBatchLossesByPosition(*b, std::vector<double>(3, 0.0), &*r);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(DocumentsAsSegments({}).ok());
  EXPECT_FALSE(DocumentsAsSegments({{1}}).ok());
  ASSERT_TRUE(AddBatchLossesByPosition(*b, loss, &*r).ok());
  EXPECT_EQ(r->documents, 2);
}

}  // namespace
}  // namespace longctx
