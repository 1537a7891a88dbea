// Why: TensorBoard is what users of torchtitan, Megatron and litgpt open
// first; longctx writes its event files natively so `tensorboard --logdir
// runs/demo` works with no TensorFlow or Python in the training process. A file
// is a sequence of TFRecords — uint64 length (little endian), masked CRC32C of
// those 8 bytes, the data, masked CRC32C of the data — each holding one
// serialized Event (train/report/tensorboard_event.proto); the first Event
// carries file_version "brain.Event:2". The reader is here too, for tests and
// for tools that check a file (every CRC is verified).
#ifndef LONGCTX_TRAIN_REPORT_EVENT_FILE_H_
#define LONGCTX_TRAIN_REPORT_EVENT_FILE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "train/report/tensorboard_event.pb.h"

namespace longctx {

// One TFRecord: header (length + its masked CRC), data, the data's masked CRC.
std::string FrameTfRecord(std::string_view data);

// Every record's data, in order. Errors (naming the path and the record's
// byte offset): a truncated record, a length or data CRC mismatch.
absl::StatusOr<std::vector<std::string>> ReadTfRecords(const std::string& path);

// Width and height from a PNG's IHDR chunk; error if `png` is not a PNG.
absl::StatusOr<std::pair<int, int>> PngSize(std::string_view png);

class EventFileWriter {
 public:
  // Creates `dir` if needed and dir/events.out.tfevents.<unix seconds>.<host>
  // (a ".N" suffix if that exists), then writes the file_version event.
  static absl::StatusOr<std::unique_ptr<EventFileWriter>> Open(const std::string& dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // Each call writes one Event with one Summary value and flushes the file.
  absl::Status AddScalar(const std::string& tag, int64_t step, double value);
  absl::Status AddHistogram(const std::string& tag, int64_t step, const tensorboard::HistogramProto& histo);
  absl::Status AddImagePng(const std::string& tag, int64_t step, std::string_view png);
  // Stamps wall_time when it is 0, frames, writes and flushes.
  absl::Status Write(tensorboard::Event event);

  const std::string& path() const { return path_; }
  int64_t records() const { return records_; }

 private:
  EventFileWriter(std::string path, FILE* f) : path_(std::move(path)), f_(f) {}
  std::string path_;
  FILE* f_ = nullptr;
  int64_t records_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_REPORT_EVENT_FILE_H_
