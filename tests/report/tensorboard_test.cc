// Why: the TensorBoard event file must be readable by TensorBoard: correct
// CRC32C (RFC 3720 vectors), correct TFRecord framing (a flipped byte is
// caught), and a real training run's file must hold exactly what
// metrics.jsonl holds (tags, steps, values), decoded twice: by the generated
// protobuf classes and by an independent Python reader
// (tests/report/decode_tfevents.py, no TensorFlow, no protobuf package).
// A start that fails on a full disk leaves no event file behind (a tmpfs, root only).
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"
#include "train/report/crc32c.h"
#include "train/report/event_file.h"
#include "train/report/tensorboard_event.pb.h"

namespace longctx {
namespace {

using ::longctx::testing::MetricsEvents;
using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;
using ::longctx::testing::TempDir;
using ::longctx::testing::WriteFile;

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);    // RFC 3720 B.4
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);  // RFC 3720 B.4
  std::string inc;
  for (int i = 0; i < 32; ++i) inc.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc32c(inc), 0x46DD794Eu);  // RFC 3720 B.4
  EXPECT_EQ(Crc32c("56789", Crc32c("1234")), 0xE3069283u);  // continued
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu}) EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(c)), c);
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
}

TEST(EventFileTest, FramingRoundTripsAndCatchesCorruption) {
  TempDir tmp;
  const std::string rec = FrameTfRecord("hello");
  ASSERT_EQ(rec.size(), 8u + 4 + 5 + 4);
  EXPECT_EQ(rec[0], 5);
  WriteFile(tmp / "ok", rec + FrameTfRecord(""));
  absl::StatusOr<std::vector<std::string>> r = ReadTfRecords(tmp / "ok");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<std::string>{"hello", ""}));
  for (size_t flip : {size_t{0}, size_t{9}, size_t{13}, rec.size() - 1}) {
    std::string bad = rec;
    bad[flip] ^= 0x10;
    WriteFile(tmp / "bad", bad);
    EXPECT_FALSE(ReadTfRecords(tmp / "bad").ok()) << "byte " << flip;
  }
  WriteFile(tmp / "short", rec.substr(0, rec.size() - 2));
  EXPECT_FALSE(ReadTfRecords(tmp / "short").ok());
}

TEST(EventFileTest, WriterFirstRecordIsFileVersion) {
  TempDir tmp;
  absl::StatusOr<std::unique_ptr<EventFileWriter>> w = EventFileWriter::Open(tmp / "run");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(std::filesystem::path((*w)->path()).filename().string().rfind("events.out.tfevents.", 0), 0u);
  ASSERT_TRUE((*w)->AddScalar("a/b", 7, 1.5).ok());
  EXPECT_FALSE((*w)->AddImagePng("img", 7, "not a png").ok());
  absl::StatusOr<std::vector<std::string>> r = ReadTfRecords((*w)->path());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  tensorboard::Event e0, e1;
  ASSERT_TRUE(e0.ParseFromString((*r)[0]));
  EXPECT_EQ(e0.file_version(), "brain.Event:2");
  EXPECT_GT(e0.wall_time(), 1.7e9);
  ASSERT_TRUE(e1.ParseFromString((*r)[1]));
  EXPECT_EQ(e1.step(), 7);
  ASSERT_EQ(e1.summary().value_size(), 1);
  EXPECT_EQ(e1.summary().value(0).tag(), "a/b");
  EXPECT_EQ(e1.summary().value(0).simple_value(), 1.5f);
  // Field numbers on the wire (TensorBoard's): Event.step = 2 (varint) -> key 0x10;
  // Event.summary = 5 (bytes) -> key 0x2a; Value.tag = 1 -> 0x0a; simple_value = 2 (fixed32) -> 0x15.
  EXPECT_NE((*r)[1].find("\x10\x07"), std::string::npos);
  EXPECT_NE((*r)[1].find('\x2a'), std::string::npos);
  EXPECT_NE((*r)[1].find("\x0a\x03" "a/b\x15"), std::string::npos);
}

// A short training run with eval, posfreq and the probe; the event file it
// writes against its metrics.jsonl.
TEST(TensorBoardRunTest, EventFileMatchesMetricsJsonl) {
  TempDir tmp;
  ASSERT_TRUE(::longctx::testing::WriteByteTokenCorpus(tmp / "text", tmp / "data.ltok", 120, 13).ok());
  const std::string out = tmp / "run";
  const std::string cmd = ::longctx::testing::TinyTrainCommand(
      tmp / "data.ltok", out,
      "--steps=6 --log_every=2 --ckpt_every=0 --eval_every=3 --data.eval_fraction=0.1"
      " --posfreq_every=3 --data.seq_len=128 --model.max_position_embeddings=128 --probe_every=3 --probe_trials=1 --probe_min_len=128"
      " --probe_max_len=128 --probe_needles=1 --probe_format=compact");
  testing::CommandResult r = RunCommand(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tensorboard: "), std::string::npos) << r.output;

  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(out))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  absl::StatusOr<std::vector<std::string>> records = ReadTfRecords(files[0]);  // checks every CRC
  ASSERT_TRUE(records.ok()) << records.status();

  std::map<std::pair<std::string, int64_t>, float> scalars;  // (tag, step) -> value
  std::map<std::string, int> counts;
  std::vector<tensorboard::Event> events;
  for (size_t i = 0; i < records->size(); ++i) {
    tensorboard::Event e;
    ASSERT_TRUE(e.ParseFromString((*records)[i])) << "record " << i;
    if (i == 0) {
      EXPECT_EQ(e.file_version(), "brain.Event:2");
      continue;
    }
    ASSERT_EQ(e.summary().value_size(), 1) << "record " << i;
    const auto& v = e.summary().value(0);
    ++counts[v.tag()];
    if (v.has_simple_value()) {
      EXPECT_TRUE(scalars.emplace(std::make_pair(v.tag(), e.step()), v.simple_value()).second)
          << "duplicate " << v.tag() << " at " << e.step();
    }
    events.push_back(e);
  }

  const std::string metrics = out + "/metrics.jsonl";
  auto expect_scalar = [&](const std::string& tag, int64_t step, double value) {
    auto it = scalars.find({tag, step});
    ASSERT_NE(it, scalars.end()) << tag << " at step " << step;
    EXPECT_EQ(it->second, static_cast<float>(value)) << tag << " at step " << step;
  };
  const auto train = MetricsEvents(metrics, "train");
  ASSERT_EQ(train.size(), 3u);  // steps 2, 4, 6
  for (const auto& ev : train) {
    const int64_t s = ev["step"].get<int64_t>();
    expect_scalar("train/loss", s, ev["loss"].get<double>());
    expect_scalar("train/lr", s, ev["lr"].get<double>());
    expect_scalar("train/grad_norm", s, ev["grad_norm"].get<double>());
    expect_scalar("train/tokens_per_s", s, ev["tokens_per_s"].get<double>());
    expect_scalar("train/seq_len", s, ev["seq_len"].get<double>());
    expect_scalar("train/loss_tokens", s, ev["loss_tokens"].get<double>());
  }
  EXPECT_EQ(counts["train/loss"], 3);
  std::vector<nlohmann::json> eval;
  for (const auto& ev : MetricsEvents(metrics, "eval"))
    if (eval.empty() || eval.back()["step"] != ev["step"]) eval.push_back(ev);
  ASSERT_EQ(eval.size(), 2u);  // steps 3 and 6
  for (const auto& ev : eval) expect_scalar("eval/loss", ev["step"].get<int64_t>(), ev["loss"].get<double>());
  EXPECT_EQ(counts["eval/loss"], static_cast<int>(eval.size()));
  const auto probe = MetricsEvents(metrics, "probe");
  ASSERT_EQ(probe.size(), 2u);  // steps 3 and 6
  for (const auto& ev : probe) {
    const int64_t s = ev["step"].get<int64_t>();
    expect_scalar("probe/effective_length", s, ev["effective_length"].get<double>());
    expect_scalar("probe/effective_length_low", s, ev["effective_length_low"].get<double>());
    expect_scalar("probe/effective_length_high", s, ev["effective_length_high"].get<double>());
    for (const auto& l : ev["lengths"]) {
      expect_scalar(absl::StrCat("probe/pass_rate/len_", l["length"].get<int>()), s, l["pass_rate"].get<double>());
      expect_scalar(absl::StrCat("probe/pass_low/len_", l["length"].get<int>()), s, l["pass_low"].get<double>());
      expect_scalar(absl::StrCat("probe/pass_high/len_", l["length"].get<int>()), s, l["pass_high"].get<double>());
      expect_scalar(absl::StrCat("probe/answer_loss/len_", l["length"].get<int>()), s, l["answer_loss"].get<double>());
    }
  }
  EXPECT_EQ(counts["probe/heatmap"], 2);
  // The final posfreq event repeats step 6's periodic one: written once.
  std::vector<nlohmann::json> posfreq;
  for (const auto& ev : MetricsEvents(metrics, "posfreq"))
    if (posfreq.empty() || posfreq.back()["step"] != ev["step"]) posfreq.push_back(ev);
  ASSERT_EQ(posfreq.size(), 2u);  // steps 3 and 6
  EXPECT_EQ(counts["posfreq/full/distance"], static_cast<int>(posfreq.size()));
  EXPECT_EQ(counts["posfreq/sliding/distance"], static_cast<int>(posfreq.size()));
  EXPECT_EQ(counts["posfreq/plot"], static_cast<int>(posfreq.size()));
  for (const auto& ev : posfreq)
    for (const char* kind : {"full", "sliding"})
      expect_scalar(absl::StrCat("posfreq/", kind, "/share_ge_half"), ev["step"].get<int64_t>(),
                    ev[kind]["share_ge_half"].get<double>());
  // Scalars only from those events: nothing extra.
  size_t expected_scalars = 6 * train.size() + eval.size() + 6 * posfreq.size();
  // effective length and its low / high; per length pass rate, its interval, answer loss
  for (const auto& ev : probe) expected_scalars += 3 + 4 * ev["lengths"].size();
  EXPECT_EQ(scalars.size(), expected_scalars);

  // Histograms and images against their sources.
  const std::string heatmap6 = ReadFile(out + "/probe/step-00000006.png");
  bool saw_heatmap6 = false, saw_histo = false;
  for (const tensorboard::Event& e : events) {
    const auto& v = e.summary().value(0);
    if (v.tag() == "probe/heatmap" && e.step() == 6) {
      saw_heatmap6 = true;
      EXPECT_EQ(v.image().encoded_image_string(), heatmap6);
      EXPECT_GT(v.image().width(), 100);
      EXPECT_GT(v.image().height(), 100);
      EXPECT_EQ(v.image().colorspace(), 3);
    }
    for (const char* kind : {"full", "sliding"}) {
      if (v.tag() != absl::StrCat("posfreq/", kind, "/distance") ||
          e.step() != posfreq.back()["step"].get<int64_t>())
        continue;
      saw_histo = true;
      const auto& bins = posfreq.back()[kind]["bins"];
      ASSERT_EQ(v.histo().bucket_size(), static_cast<int>(bins.size()));
      ASSERT_EQ(v.histo().bucket_limit_size(), static_cast<int>(bins.size()));
      double total = 0, lo = -1, hi = -1;
      for (size_t b = 0; b < bins.size(); ++b) {
        EXPECT_EQ(v.histo().bucket(b), bins[b][2].get<double>());
        EXPECT_EQ(v.histo().bucket_limit(b), bins[b][1].get<double>() - 1);
        total += bins[b][2].get<double>();
        if (bins[b][2].get<double>() > 0) {
          if (lo < 0) lo = bins[b][0].get<double>();
          hi = bins[b][1].get<double>() - 1;
        }
      }
      EXPECT_EQ(v.histo().num(), total);
      EXPECT_GT(total, 0);
      // min/max: the distances that occur (a sliding window's stop at its window).
      EXPECT_EQ(v.histo().min(), lo) << kind;
      EXPECT_EQ(v.histo().max(), hi) << kind;
    }
  }
  EXPECT_TRUE(saw_heatmap6);
  EXPECT_TRUE(saw_histo);

  // The independent Python reader agrees record for record.
  testing::CommandResult py =
      RunCommand(absl::StrCat("python3 ", SourcePath("tests/report/decode_tfevents.py"), " ", files[0]));
  ASSERT_EQ(py.exit_code, 0) << py.output;
  std::vector<std::string> lines = absl::StrSplit(py.output, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), records->size());
  EXPECT_EQ(nlohmann::json::parse(lines[0])["file_version"], "brain.Event:2");
  for (size_t i = 1; i < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    const tensorboard::Event& e = events[i - 1];
    const auto& v = e.summary().value(0);
    EXPECT_EQ(j["step"].get<int64_t>(), e.step()) << lines[i];
    ASSERT_EQ(j["values"].size(), 1u) << lines[i];
    const auto& pv = j["values"][0];
    EXPECT_EQ(pv["tag"], v.tag());
    if (v.has_simple_value()) {
      EXPECT_EQ(pv["simple_value"].get<float>(), v.simple_value()) << lines[i];
    }
    if (v.has_image()) {
      EXPECT_EQ(pv["image"]["png_bytes"].get<size_t>(), v.image().encoded_image_string().size());
      EXPECT_TRUE(pv["image"]["png_signature_ok"].get<bool>());
      EXPECT_EQ(pv["image"]["width"].get<int>(), v.image().width());
    }
    if (v.has_histo()) {
      EXPECT_EQ(pv["histo"]["num"].get<double>(), v.histo().num());
    }
  }

  // tensorboard: false writes no event file.
  r = RunCommand(::longctx::testing::WithFlags(cmd, absl::StrCat("--out_dir=", tmp / "off", " --tensorboard=false --probe_every=0")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& e : std::filesystem::directory_iterator(tmp / "off"))
    EXPECT_NE(e.path().filename().string().rfind("events.out", 0), 0u) << e.path();
}

// Issue 47: with 0 bytes free every failed start left one more (empty) event
// file. out_dir is a full 1.2 MB tmpfs (needs root, as the full-disk tests of
// tests/checkpoint): three failed starts leave none; with space again, one
// run writes one.
TEST(TensorBoardRunTest, FailedStartsOnAFullDiskLeaveNoEventFile) {
  TempDir tmp;
  ASSERT_TRUE(::longctx::testing::WriteByteTokenCorpus(tmp / "text", tmp / "data.ltok", 40, 3).ok());
  const std::string disk = tmp / "small";
  std::filesystem::create_directories(disk);
  if (mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=1200k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs at " << disk << " (needs root): " << std::strerror(errno);
  struct Unmount {
    std::string p;
    ~Unmount() { umount2(p.c_str(), MNT_DETACH); }
  } unmount{disk};
  const std::string out = disk + "/run";
  std::filesystem::create_directories(out);
  {  // Fill the disk to its last byte.
    std::ofstream fill(disk + "/fill", std::ios::binary);
    const std::string block(4096, 'x');
    while (fill.write(block.data(), block.size()) && fill.flush()) {
    }
  }
  auto event_files = [&] {
    std::vector<std::string> f;
    for (const auto& e : std::filesystem::directory_iterator(out))
      if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) f.push_back(e.path().filename());
    return f;
  };
  const std::string cmd =
      ::longctx::testing::TinyTrainCommand(tmp / "data.ltok", out, "--steps=1 --ckpt_every=1 --probe_every=0");
  for (int i = 0; i < 3; ++i) {
    testing::CommandResult r = RunCommand(cmd);
    EXPECT_NE(r.exit_code, 0) << r.output;
    if (i == 0) std::printf("full disk, start 1: %s\n", r.output.substr(r.output.find("error")).c_str());
  }
  EXPECT_TRUE(event_files().empty()) << "left: " << absl::StrJoin(event_files(), ", ");
  // The writer itself: a file whose first record cannot be written is removed.
  absl::StatusOr<std::unique_ptr<EventFileWriter>> w = EventFileWriter::Open(out);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("No space left on device"), std::string::npos) << w.status();
  EXPECT_TRUE(event_files().empty()) << "left: " << absl::StrJoin(event_files(), ", ");
  std::filesystem::remove(disk + "/fill");
  testing::CommandResult r = RunCommand(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(event_files().size(), 1u) << absl::StrJoin(event_files(), ", ");
}

}  // namespace
}  // namespace longctx
