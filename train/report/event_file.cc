// Why: see event_file.h.
#include "train/report/event_file.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "train/report/crc32c.h"

namespace longctx {
namespace {

void PutLe32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void PutLe64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string FrameTfRecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  PutLe64(out, data.size());
  PutLe32(out, MaskCrc32c(Crc32c(std::string_view(out.data(), 8))));
  out.append(data);
  PutLe32(out, MaskCrc32c(Crc32c(data)));
  return out;
}

absl::StatusOr<std::vector<std::string>> ReadTfRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::string buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t pos = 0;
  while (pos < buf.size()) {
    const std::string where = absl::StrCat(path, ": record ", records.size(), " at byte ", pos);
    if (buf.size() - pos < 12) return absl::DataLossError(absl::StrCat(where, ": truncated header"));
    const uint64_t len = GetLe(buf.data() + pos, 8);
    const uint32_t len_crc = static_cast<uint32_t>(GetLe(buf.data() + pos + 8, 4));
    if (MaskCrc32c(Crc32c(std::string_view(buf.data() + pos, 8))) != len_crc)
      return absl::DataLossError(absl::StrCat(where, ": length CRC mismatch"));
    if (buf.size() - pos - 12 < len + 4) return absl::DataLossError(absl::StrCat(where, ": truncated data"));
    std::string_view data(buf.data() + pos + 12, len);
    const uint32_t data_crc = static_cast<uint32_t>(GetLe(buf.data() + pos + 12 + len, 4));
    if (MaskCrc32c(Crc32c(data)) != data_crc) return absl::DataLossError(absl::StrCat(where, ": data CRC mismatch"));
    records.emplace_back(data);
    pos += 12 + len + 4;
  }
  return records;
}

absl::StatusOr<std::pair<int, int>> PngSize(std::string_view png) {
  static constexpr char kSig[] = "\x89PNG\r\n\x1a\n";
  if (png.size() < 24 || std::memcmp(png.data(), kSig, 8) != 0 || png.substr(12, 4) != "IHDR")
    return absl::InvalidArgumentError("not a PNG (no signature and IHDR chunk)");
  auto be32 = [&](size_t off) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(png[off + i]);
    return static_cast<int>(v);
  };
  return std::make_pair(be32(16), be32(20));
}

absl::StatusOr<std::unique_ptr<EventFileWriter>> EventFileWriter::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("tensorboard: cannot create ", dir, ": ", ec.message()));
  char host[256] = "localhost";
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof(host) - 1] = '\0';
  const std::string base =
      absl::StrCat(dir, "/events.out.tfevents.", static_cast<int64_t>(Now()), ".", host);
  std::string path = base;
  for (int n = 1; std::filesystem::exists(path); ++n) path = absl::StrCat(base, ".", n);
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::UnavailableError(absl::StrCat("tensorboard: cannot create ", path));
  std::unique_ptr<EventFileWriter> w(new EventFileWriter(path, f));
  tensorboard::Event first;
  first.set_file_version("brain.Event:2");
  if (absl::Status st = w->Write(std::move(first)); !st.ok()) {
    // A file without its file_version record is no event file: a run that
    // fails here (a full disk) leaves none behind, however often it is retried.
    w.reset();
    std::remove(path.c_str());
    return st;
  }
  return w;
}

EventFileWriter::~EventFileWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

absl::Status EventFileWriter::Write(tensorboard::Event event) {
  if (event.wall_time() == 0) event.set_wall_time(Now());
  std::string data;
  if (!event.SerializeToString(&data)) return absl::InternalError("tensorboard: cannot serialize an Event");
  const std::string rec = FrameTfRecord(data);
  if (std::fwrite(rec.data(), 1, rec.size(), f_) != rec.size() || std::fflush(f_) != 0)
    return absl::UnavailableError(absl::StrCat("tensorboard: cannot write ", path_, ": ", std::strerror(errno)));
  ++records_;
  return absl::OkStatus();
}

absl::Status EventFileWriter::AddScalar(const std::string& tag, int64_t step, double value) {
  tensorboard::Event e;
  e.set_step(step);
  tensorboard::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  return Write(std::move(e));
}

absl::Status EventFileWriter::AddHistogram(const std::string& tag, int64_t step,
                                           const tensorboard::HistogramProto& histo) {
  tensorboard::Event e;
  e.set_step(step);
  tensorboard::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  *v->mutable_histo() = histo;
  return Write(std::move(e));
}

absl::Status EventFileWriter::AddImagePng(const std::string& tag, int64_t step, std::string_view png) {
  absl::StatusOr<std::pair<int, int>> size = PngSize(png);
  if (!size.ok()) return absl::InvalidArgumentError(absl::StrCat("tensorboard image ", tag, ": ", size.status().message()));
  tensorboard::Event e;
  e.set_step(step);
  tensorboard::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  tensorboard::Summary::Image* img = v->mutable_image();
  img->set_width(size->first);
  img->set_height(size->second);
  img->set_colorspace(3);
  img->set_encoded_image_string(std::string(png));
  return Write(std::move(e));
}

}  // namespace longctx
