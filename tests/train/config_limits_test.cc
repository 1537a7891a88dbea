// Why: the fault probe found `longctx plan --config /dev/zero` reading forever
// and `plan --config /tmp` (a directory) succeeding with defaults. The config
// loader now refuses what is not a bounded text file, by name; these tests
// fail if either behaviour comes back (the CLI case would hang the test).
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"
#include "train/config_loader.h"

namespace longctx {
namespace {

using ::testing::HasSubstr;

TEST(ConfigLimits, DeviceIsRefusedNotReadForever) {
  for (const char* dev : {"/dev/zero", "/dev/urandom"}) {
    auto c = LoadTrainConfig(dev, {});
    ASSERT_FALSE(c.ok()) << dev;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(std::string(dev) + "\" is not a regular file"));
  }
}

TEST(ConfigLimits, DirectoryIsRefusedNotDefaults) {
  auto c = LoadTrainConfig(::testing::TempDir(), {});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("is a directory"));
}

TEST(ConfigLimits, OversizedFileIsRefusedWithItsSize) {
  const std::string path = ::testing::TempDir() + "/big.textproto";
  std::ofstream(path) << std::string(200, '#');
  EXPECT_TRUE(ReadConfigText(path, 200).ok());
  std::ofstream(path, std::ios::app) << "#";
  auto t = ReadConfigText(path, 200);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("is 201 bytes; a TrainConfig is at most 200"));
}

TEST(ConfigLimits, HundredMillionLayersIsRefusedBeforeAnyPerLayerTable) {
  auto c = LoadTrainConfig(testing::SourcePath("configs/demo.textproto"), {"--model.num_layers=100000000"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("model.num_layers: 100000000 is more than 65536"));
  EXPECT_TRUE(LoadTrainConfig(testing::SourcePath("configs/demo.textproto"), {"--model.num_layers=4096"}).ok());
}

TEST(ConfigLimits, CliPlanOnDevZeroAndDirectoryExitsNonZero) {
  for (const char* path : {"/dev/zero", "/tmp"}) {
    const auto r = testing::RunCommand("timeout 20 " + testing::LongctxBinary() + " plan --config " + path + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << path << ": " << r.output;  // 124 would be the timeout: the old hang
    EXPECT_THAT(r.output, HasSubstr(path)) << path;
  }
}

}  // namespace
}  // namespace longctx
