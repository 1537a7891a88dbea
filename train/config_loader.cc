// Why: see config_loader.h. Overrides go through protobuf reflection, so a
// field added to a .proto is overridable at once, with no flag to declare;
// the parser's errors are collected (not printed to stderr by protobuf) and
// the first one becomes the single line the user sees.
#include "train/config_loader.h"
#include "base/status_macros.h"
#include "kernels/backend_registry.h"

#include <algorithm>
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <type_traits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "model/config.h"

namespace longctx {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;


// Keeps the first error (later ones are usually consequences of it).
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  bool has_error() const { return has_error_; }
  // `filename:LINE:COL: message`, 1-based. Protobuf places an unknown-field
  // error at the token after the name (the ':' or '{'); move it back to the
  // name itself, which is where the user has to look.
  std::string Format(const std::string& filename, absl::string_view text) const {
    if (line_ < 0) return absl::StrCat(filename, ": ", message_);
    int column = column_;
    const std::string marker = "has no field named \"";
    const size_t at = message_.find(marker);
    if (at != std::string::npos) {
      const size_t begin = at + marker.size();
      const size_t end = message_.find('"', begin);
      const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
      if (end != std::string::npos && line_ < static_cast<int>(lines.size())) {
        const absl::string_view name(message_.data() + begin, end - begin);
        const absl::string_view line = lines[line_];
        const size_t found = line.substr(0, std::min<size_t>(column_, line.size())).rfind(name);
        if (!name.empty() && found != absl::string_view::npos) column = static_cast<int>(found);
      }
    }
    return absl::StrCat(filename, ":", line_ + 1, ":", column + 1, ": ", message_);
  }

 private:
  bool has_error_ = false;
  int line_ = -1, column_ = -1;
  std::string message_;
};

// One scalar `value` for field f: set (repeated = false) or added.
absl::Status SetScalar(Message* m, const FieldDescriptor* f, const std::string& value, bool add,
                       const std::string& flag) {
  const Reflection* r = m->GetReflection();
  auto bad = [&](const std::string& expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": bad value \"", value, "\" for ", f->full_name(), " (expected ", expected, ")"));
  };
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad("int32");
      add ? r->AddInt32(m, f, v) : r->SetInt32(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v)) return bad("int64");
      add ? r->AddInt64(m, f, v) : r->SetInt64(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v;
      if (absl::StartsWith(absl::StripAsciiWhitespace(value), "-") || !absl::SimpleAtoi(value, &v))
        return bad("uint32");
      add ? r->AddUInt32(m, f, v) : r->SetUInt32(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v;
      if (absl::StartsWith(absl::StripAsciiWhitespace(value), "-") || !absl::SimpleAtoi(value, &v))
        return bad("uint64");
      add ? r->AddUInt64(m, f, v) : r->SetUInt64(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      float v;
      if (!absl::SimpleAtof(value, &v) || !std::isfinite(v)) return bad("a finite float");
      add ? r->AddFloat(m, f, v) : r->SetFloat(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v;
      if (!absl::SimpleAtod(value, &v) || !std::isfinite(v)) return bad("a finite double");
      add ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (!absl::SimpleAtob(value, &v)) return bad("true or false");
      add ? r->AddBool(m, f, v) : r->SetBool(m, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_STRING:
      add ? r->AddString(m, f, value) : r->SetString(m, f, value);
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* type = f->enum_type();
      const EnumValueDescriptor* ev = type->FindValueByName(std::string(absl::StripAsciiWhitespace(value)));
      if (ev == nullptr) ev = type->FindValueByName(absl::AsciiStrToUpper(absl::StripAsciiWhitespace(value)));
      int number;
      if (ev == nullptr && absl::SimpleAtoi(value, &number)) ev = type->FindValueByNumber(number);
      if (ev == nullptr) {
        std::vector<std::string> names;
        for (int i = 0; i < type->value_count(); ++i) names.push_back(type->value(i)->name());
        return bad(absl::StrCat(type->full_name(), ": one of ", absl::StrJoin(names, ", ")));
      }
      add ? r->AddEnum(m, f, ev) : r->SetEnum(m, f, ev);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": ", f->full_name(), " is a message; set one of its fields (", flag, ".FIELD=VALUE)"));
}

// Every unset singular field set to its default, recursively.
void FillDefaults(Message* m) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      FillDefaults(r->MutableMessage(m, f));
      continue;
    }
    if (r->HasField(*m, f)) continue;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(m, f, f->default_value_int32()); break;
      case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(m, f, f->default_value_int64()); break;
      case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(m, f, f->default_value_uint32()); break;
      case FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(m, f, f->default_value_uint64()); break;
      case FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(m, f, f->default_value_float()); break;
      case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(m, f, f->default_value_double()); break;
      case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(m, f, f->default_value_bool()); break;
      case FieldDescriptor::CPPTYPE_STRING: r->SetString(m, f, f->default_value_string()); break;
      case FieldDescriptor::CPPTYPE_ENUM: r->SetEnum(m, f, f->default_value_enum()); break;
      case FieldDescriptor::CPPTYPE_MESSAGE: break;
    }
  }
}

template <class T>
bool Finite(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isfinite(v);
  return true;
}
// These comparisons are false for NaN, so NaN is rejected too.
template <class T>
absl::Status Positive(const char* field, T v) {
  if (v > 0 && Finite(v)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be > 0 (got ", v, ")"));
}
template <class T>
absl::Status NonNegative(const char* field, T v) {
  if (v >= 0 && Finite(v)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be >= 0 (got ", v, ")"));
}
absl::Status UnitInterval(const char* field, float v) {  // [0, 1)
  if (v >= 0 && v < 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be in [0, 1) (got ", v, ")"));
}

}  // namespace

absl::StatusOr<TrainConfig> ParseTrainConfigText(const std::string& text, const std::string& filename) {
  TrainConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    if (errors.has_error()) return absl::InvalidArgumentError(errors.Format(filename, text));
    return absl::InvalidArgumentError(absl::StrCat(filename, ": not a valid longctx.TrainConfig text proto"));
  }
  return config;
}

absl::Status ApplyOverride(Message* msg, const std::string& assignment) {
  absl::string_view stripped = absl::StripAsciiWhitespace(assignment);
  absl::ConsumePrefix(&stripped, "--");
  const std::string a(stripped);
  const size_t eq = a.find('=');
  const std::string path = a.substr(0, eq);
  const std::string flag = absl::StrCat("--", path);
  if (eq == std::string::npos || path.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": expected --section.field=value (e.g. --model.hidden_size=128)"));
  const std::string value = a.substr(eq + 1);

  // Work on a copy so that a failed override leaves msg exactly as it was
  // (walking the path would otherwise create empty sections).
  std::unique_ptr<Message> copy(msg->New());
  copy->CopyFrom(*msg);
  const std::vector<std::string> parts = absl::StrSplit(path, '.');
  Message* m = copy.get();
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const Descriptor* desc = m->GetDescriptor();
    const FieldDescriptor* f = desc->FindFieldByName(parts[i]);
    if (f == nullptr)
      return absl::InvalidArgumentError(absl::StrCat(flag, ": no such field in ", desc->full_name()));
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated())
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", f->full_name(),
                                                     " is not a message section, it has no field \"",
                                                     parts[i + 1], "\""));
    m = m->GetReflection()->MutableMessage(m, f);
  }
  const Descriptor* desc = m->GetDescriptor();
  const FieldDescriptor* f = desc->FindFieldByName(parts.back());
  if (f == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(flag, ": no such field in ", desc->full_name()));
  if (f->is_repeated()) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": repeated message field ", f->full_name(), " cannot be set from a flag"));
    m->GetReflection()->ClearField(m, f);
    if (!value.empty()) {
      for (absl::string_view item : absl::StrSplit(value, ',')) {
        LONGCTX_RETURN_IF_ERROR(
            SetScalar(m, f, std::string(absl::StripAsciiWhitespace(item)), /*add=*/true, flag));
      }
    }
  } else {
    LONGCTX_RETURN_IF_ERROR(SetScalar(m, f, value, /*add=*/false, flag));
  }
  msg->CopyFrom(*copy);
  return absl::OkStatus();
}

// Context parallelism cuts every training row into 2 C equal chunks: the
// pretraining length and every SFT length must divide. (The world size is
// checked when the job starts: C must divide it.)
absl::Status ValidateContextParallel(const TrainConfig& c) {
  const int cp = c.context_parallel();
  if (cp < 1)
    return absl::InvalidArgumentError(absl::StrCat("context_parallel: must be >= 1 (got ", cp, ")"));
  if (cp == 1) return absl::OkStatus();
  const int per_rank = c.context_parallel_balanced() ? 8 : 2;
  auto cut = [cp, per_rank](const char* field, int64_t len) -> absl::Status {
    if (len % (per_rank * cp) == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", len, " tokens cannot be cut into ", per_rank, " x context_parallel = ", per_rank * cp,
        " equal chunks; use a multiple of ", per_rank * cp, " or another context_parallel"));
  };
  if (!c.data().has_sft()) return cut("data.seq_len", c.data().seq_len());
  for (int32_t L : c.data().sft().seq_lens()) LONGCTX_RETURN_IF_ERROR(cut("data.sft.seq_lens", L));
  if (c.data().sft().seq_lens().empty()) {
    LONGCTX_RETURN_IF_ERROR(cut("data.sft.seq_lens (default)", 8192));
    LONGCTX_RETURN_IF_ERROR(cut("data.sft.seq_lens (default)", 65536));
  }
  return absl::OkStatus();
}

absl::Status ValidateTrainConfig(const TrainConfig& c) {
  // Checked before ResolveModelConfig builds per-layer tables: 1e8 layers took
  // 13 s and 1.2 GB only to be refused by the memory check afterwards.
  if (c.model().num_layers() > kMaxNumLayers)
    return absl::InvalidArgumentError(absl::StrCat("model.num_layers: ", c.model().num_layers(), " is more than ",
                                                   kMaxNumLayers, " (no model this size fits any machine)"));
  auto dims = ResolveModelConfig(c.model());
  if (!dims.ok()) return dims.status();

  LONGCTX_RETURN_IF_ERROR(Positive("steps", c.steps()));
  if (c.grad_accum() < 1)
    return absl::InvalidArgumentError(absl::StrCat("grad_accum: must be >= 1 (got ", c.grad_accum(), ")"));
  LONGCTX_RETURN_IF_ERROR(Positive("log_every", c.log_every()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("ckpt_every", c.ckpt_every()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("keep_checkpoints", c.keep_checkpoints()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("eval_every", c.eval_every()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("eval_batches", c.eval_batches()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("threads", c.threads()));
  if (c.out_dir().empty()) return absl::InvalidArgumentError("out_dir: must not be empty");
  if (!FindBackend(c.backend()).ok())
    return absl::InvalidArgumentError(
        absl::StrCat("backend: must be ", KnownBackendNames(), " (got \"", c.backend(), "\")"));
  if (c.precision() != FP32 && c.precision() != BF16)
    return absl::InvalidArgumentError("precision: must be FP32 or BF16");
  if (absl::Status st = ResolveBf16Activations(c.model(), c.precision() == BF16).status(); !st.ok()) return st;

  const DataConfig& d = c.data();
  LONGCTX_RETURN_IF_ERROR(Positive("data.seq_len", d.seq_len()));
  if (absl::Status st = ValidateContextParallel(c); !st.ok()) return st;
  LONGCTX_RETURN_IF_ERROR(Positive("data.batch_size", d.batch_size()));
  LONGCTX_RETURN_IF_ERROR(UnitInterval("data.eval_fraction", d.eval_fraction()));
  if (!(d.join_fraction() >= 0 && d.join_fraction() <= 1))
    return absl::InvalidArgumentError(
        absl::StrCat("data.join_fraction: must be in [0, 1] (got ", d.join_fraction(), ")"));
  if (d.join_fraction() > 0 && !d.document_mask())
    return absl::InvalidArgumentError(absl::StrCat(
        "data.join_fraction: ", d.join_fraction(),
        " needs data.document_mask: true (without masking every row is already one segment)"));
  LONGCTX_RETURN_IF_ERROR(NonNegative("loss_by_position_every", c.loss_by_position_every()));
  LONGCTX_RETURN_IF_ERROR(Positive("loss_by_position_docs", c.loss_by_position_docs()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("loss_by_position_max_len", c.loss_by_position_max_len()));
  if (c.loss_by_position_max_len() > 0 && c.loss_by_position_max_len() < d.seq_len())
    return absl::InvalidArgumentError(absl::StrCat("loss_by_position_max_len: ", c.loss_by_position_max_len(),
                                                   " is shorter than data.seq_len ", d.seq_len(),
                                                   " (the probe reads positions beyond the training length; 0 = 4 x seq_len)"));

  const OptimConfig& o = c.optim();
  LONGCTX_RETURN_IF_ERROR(NonNegative("optim.lr", o.lr()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("optim.min_lr", o.min_lr()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("optim.warmup_steps", o.warmup_steps()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("optim.decay_steps", o.decay_steps()));
  LONGCTX_RETURN_IF_ERROR(UnitInterval("optim.beta1", o.beta1()));
  LONGCTX_RETURN_IF_ERROR(UnitInterval("optim.beta2", o.beta2()));
  LONGCTX_RETURN_IF_ERROR(Positive("optim.eps", o.eps()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("optim.weight_decay", o.weight_decay()));
  LONGCTX_RETURN_IF_ERROR(NonNegative("optim.grad_clip", o.grad_clip()));
  return absl::OkStatus();
}

absl::Status ValidateRunLimits(const TrainConfig& c) {
  const int32_t max_pos = c.model().max_position_embeddings();
  if (max_pos < c.data().seq_len())
    return absl::InvalidArgumentError(absl::StrCat(
        "model.max_position_embeddings: ", max_pos, " is smaller than data.seq_len ", c.data().seq_len(),
        " (the rows use positions the exported config.json says the model does not have); set it to at least ",
        c.data().seq_len()));
  if (c.optim().min_lr() > c.optim().lr())
    return absl::InvalidArgumentError(absl::StrCat("optim.min_lr: ", c.optim().min_lr(), " is above optim.lr ",
                                                   c.optim().lr(),
                                                   " (the decay would raise the rate); give min_lr <= lr"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadConfigText(const std::string& path, int64_t max_bytes) {
  // Refuse what is not a file of text before opening it: a directory would
  // "read" as empty (a run of defaults), a character device such as /dev/zero
  // never ends. A FIFO (`--config <(...)`) is allowed; the size cap bounds it.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat("cannot read config file \"", path, "\": ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat("config file \"", path, "\" is a directory, not a text-format TrainConfig"));
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat("config file \"", path, "\" is not a regular file (a device or socket); give a text-format TrainConfig"));
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes)
    return absl::InvalidArgumentError(absl::StrCat("config file \"", path, "\" is ", st.st_size,
                                                   " bytes; a TrainConfig is at most ", max_bytes, " bytes"));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read config file \"", path, "\": ", std::strerror(errno)));
  }
  std::string text;
  char buf[65536];
  while (in) {
    in.read(buf, sizeof buf);
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > max_bytes)
      return absl::InvalidArgumentError(absl::StrCat("config file \"", path, "\" is over ", max_bytes,
                                                     " bytes; a TrainConfig is at most that"));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading config file \"", path, "\""));
  return text;
}

absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path, const std::vector<std::string>& overrides) {
  absl::StatusOr<std::string> text = ReadConfigText(path);
  if (!text.ok()) return text.status();
  auto config = ParseTrainConfigText(*text, path);
  if (!config.ok()) return config.status();
  for (const std::string& o : overrides) LONGCTX_RETURN_IF_ERROR(ApplyOverride(&*config, o));
  LONGCTX_RETURN_IF_ERROR(ValidateTrainConfig(*config));
  LONGCTX_RETURN_IF_ERROR(ValidateRunLimits(*config));
  return config;
}

absl::StatusOr<TrainConfig> LoadSavedTrainConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadConfigText(path);
  if (!text.ok()) return text.status();
  auto config = ParseTrainConfigText(*text, path);
  if (!config.ok()) return config.status();
  LONGCTX_RETURN_IF_ERROR(ValidateTrainConfig(*config));
  return config;
}

std::string ToTextProto(const TrainConfig& config, bool include_defaults) {
  TrainConfig copy = config;
  if (include_defaults) FillDefaults(&copy);
  std::string out;
  google::protobuf::TextFormat::PrintToString(copy, &out);
  return out;
}

}  // namespace longctx
