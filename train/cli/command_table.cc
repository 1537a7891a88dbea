// Why: see command_table.h. This file is the only one that knows how the
// command line is parsed.
//
// The parser is CLI11 (Debian's libcli11-dev 2.1.2, header-only), not Abseil
// flags. Abseil flags are process-global: every ABSL_FLAG is visible to every
// command, so a command cannot own its flags, `--help` lists all of them, and a
// flag meant for another command is accepted and ignored — the problems this
// table exists to remove. Working around that (one flag namespace per command,
// routing argv by hand, a help printer of our own) would rebuild a subcommand
// parser on top of a global registry. CLI11 has subcommands with their own
// options, per-subcommand `--help`, `--flag value` and `--flag=value`, typed
// values with conversion errors, and collects what it does not recognise
// (allow_extras) so this file can turn those into TrainConfig overrides or
// into errors that name the command.
#include "train/cli/command_table.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <CLI/CLI.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "train/config_loader.h"
#include "train/train.pb.h"

namespace longctx::cli {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

constexpr char kOverrideSynopsis[] = " [--section.field=value ...]";

// CLI11's help with the override synopsis on the usage line of commands that take them.
class Formatter : public CLI::Formatter {
 public:
  explicit Formatter(const std::set<const CLI::App*>* takes_overrides) : takes_overrides_(takes_overrides) {}
  std::string make_usage(const CLI::App* app, std::string name) const override {
    if (app->get_parent() == nullptr) return "Usage: longctx COMMAND [flags]   (longctx COMMAND --help: its flags)\n";
    std::string usage = CLI::Formatter::make_usage(app, name);
    if (takes_overrides_->count(app) > 0 && !usage.empty() && usage.back() == '\n')
      usage.insert(usage.size() - 1, kOverrideSynopsis);
    return usage;
  }

 private:
  const std::set<const CLI::App*>* takes_overrides_;
};

// The TrainConfig field a dotted path names (sections descended into), or null.
const FieldDescriptor* FindTrainConfigField(const std::string& path) {
  const Descriptor* d = TrainConfig::descriptor();
  const FieldDescriptor* f = nullptr;
  const std::vector<std::string> parts = absl::StrSplit(path, '.');
  for (const std::string& part : parts) {
    if (d == nullptr) return nullptr;
    f = d->FindFieldByName(part);
    if (f == nullptr) return nullptr;
    d = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated() ? f->message_type() : nullptr;
  }
  return f;
}

bool IsBoolWord(const std::string& s) {
  return s == "true" || s == "false" || s == "1" || s == "0" || s == "yes" || s == "no";
}

// The app of the deepest command CLI11 selected (the root when none).
CLI::App* SelectedApp(CLI::App* root) {
  CLI::App* app = root;
  while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
  return app;
}

std::string PathOf(const CLI::App* app) {
  std::vector<std::string> parts;
  for (; app != nullptr && app->get_parent() != nullptr; app = app->get_parent()) parts.push_back(app->get_name());
  std::reverse(parts.begin(), parts.end());
  return absl::StrJoin(parts, " ");
}

// Long names of the options given to `app` (help excluded).
std::vector<std::string> GivenOptions(const CLI::App* app) {
  std::vector<std::string> given;
  for (const CLI::Option* o : app->get_options())
    if (o->count() > 0 && o != app->get_help_ptr()) given.push_back("--" + o->get_lnames().front());
  return given;
}

}  // namespace

CommandTable::CommandTable()
    : root_(std::make_unique<CLI::App>("longctx: pretrain, evaluate and analyse long-context language models",
                                       "longctx")) {
  root_->formatter(std::make_shared<Formatter>(&takes_overrides_));
  root_->option_defaults()->always_capture_default();
  root_->allow_extras();
  root_->require_subcommand(0, 1);
  root_->footer([this] { return CommandList(); });
}

CommandTable::~CommandTable() = default;

CLI::App* CommandTable::Add(CommandSpec spec) {
  const size_t space = spec.path.rfind(' ');
  CLI::App* parent = root_.get();
  if (space != std::string::npos) {
    auto it = by_path_.find(spec.path.substr(0, space));
    if (it == by_path_.end()) {
      std::fprintf(stderr, "longctx: internal error: command '%s' added before its parent\n", spec.path.c_str());
      std::abort();
    }
    parent = entries_[it->second].app;
    parent->require_subcommand(0, 1);
  }
  CLI::App* app = parent->add_subcommand(spec.path.substr(space == std::string::npos ? 0 : space + 1), spec.summary);
  app->allow_extras();  // what it does not know comes back to CollectOverrides, which reports it
  // `longctx --help` lists every command itself (CommandList); a group lists its subcommands.
  app->group(parent == root_.get() ? "" : "Subcommands");
  if (!spec.notes.empty()) app->footer(spec.notes);
  if (spec.config_overrides) takes_overrides_.insert(app);
  by_path_[spec.path] = entries_.size();
  entries_.push_back(Entry{std::move(spec), app});
  return app;
}

void CommandTable::SetVersion(std::function<std::string()> text) {
  root_->set_version_flag("--version", std::move(text), "Print the version, the git commit and the backends built in");
}

std::string CommandTable::CommandList() const {
  std::string out = "Commands:\n";
  for (const Entry& e : entries_)
    if (e.spec.run) out += absl::StrCat("  longctx ", e.spec.path, std::string(20 - std::min<size_t>(18, e.spec.path.size()), ' '),
                                        e.spec.summary, "\n");
  return out;
}

const CommandTable::Entry* CommandTable::EntryOf(const CLI::App* app) const {
  for (const Entry& e : entries_)
    if (e.app == app) return &e;
  return nullptr;
}

int CommandTable::Fail(const std::string& path, const std::string& message) const {
  std::fprintf(stderr, "longctx%s%s: error: %s\n", path.empty() ? "" : " ", path.c_str(), message.c_str());
  return 1;
}

std::string CommandTable::UnknownFlagHint(const Entry& e, const std::string& name) const {
  std::vector<std::string> similar, elsewhere;
  for (const CLI::Option* o : e.app->get_options())
    for (const std::string& l : o->get_lnames())
      if (absl::StartsWith(l, name) || absl::StartsWith(name, l)) similar.push_back("--" + l);
  for (const Entry& other : entries_) {
    if (&other == &e) continue;
    for (const CLI::Option* o : other.app->get_options())
      for (const std::string& l : o->get_lnames())
        if (l == name) elsewhere.push_back(other.spec.path);
  }
  std::string hint;
  if (!similar.empty()) absl::StrAppend(&hint, "; did you mean ", absl::StrJoin(similar, " or "), "?");
  if (!elsewhere.empty()) absl::StrAppend(&hint, " (--", name, " is a flag of: ", absl::StrJoin(elsewhere, ", "), ")");
  return absl::StrCat(hint, "; `longctx ", e.spec.path, " --help` lists its flags");
}

absl::Status CommandTable::CollectOverrides(const Entry& e, const std::vector<std::string>& rest,
                                            std::vector<std::string>* overrides) const {
  TrainConfig scratch;  // each override is applied here once, to check it now and name it
  // Each field once: a second value used to replace the first without a
  // word, which for a repeated field (data.sft.seq_lens) looked like appending.
  std::map<std::string, std::string> given;  // field path -> its value
  for (size_t i = 0; i < rest.size(); ++i) {
    const std::string& arg = rest[i];
    if (!absl::StartsWith(arg, "-") || arg == "-")
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "' (", e.spec.path,
                                                     " takes no positional arguments; its flags are --name value)"));
    const std::string body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    const size_t eq = body.find('=');
    const std::string name = body.substr(0, eq);
    const FieldDescriptor* field = e.spec.config_overrides ? FindTrainConfigField(name) : nullptr;
    if (field == nullptr) {
      if (!e.spec.config_overrides)
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag --", name, ": not a flag of ", e.spec.path, UnknownFlagHint(e, name)));
      if (name.find('.') == std::string::npos)
        return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, ": not a flag of ", e.spec.path,
                                                       " nor a TrainConfig field", UnknownFlagHint(e, name)));
      // "--model.foo: no such field in longctx.ModelConfig": the section it is not in.
      const absl::Status missing = ApplyOverride(&scratch, name + "=");
      absl::string_view why = missing.message();
      absl::ConsumePrefix(&why, absl::StrCat("--", name, ": "));
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, ": ", why, UnknownFlagHint(e, name)));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = body.substr(eq + 1);
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL && !field->is_repeated()) {
      value = i + 1 < rest.size() && IsBoolWord(rest[i + 1]) ? rest[++i] : "true";
    } else if (i + 1 < rest.size() && !absl::StartsWith(rest[i + 1], "--")) {
      value = rest[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": needs a value (--", name, "=VALUE or --", name, " VALUE)"));
    }
    if (auto [it, first] = given.emplace(name, value); !first) {
      std::string how = "give it once";
      if (field->is_repeated())
        how = absl::StrCat("a repeated field takes one comma-separated list: --", name, "=",
                           it->second.empty() ? "" : it->second + ",", value);
      return absl::InvalidArgumentError(absl::StrCat("--", name, " given twice (--", name, "=", it->second,
                                                     ", then --", name, "=", value, "); ", how));
    }
    const std::string assignment = absl::StrCat(name, "=", value);
    if (absl::Status st = ApplyOverride(&scratch, assignment); !st.ok()) return st;
    overrides->push_back(assignment);
  }
  return absl::OkStatus();
}

int CommandTable::Main(int argc, const char* const* argv) {
  try {
    root_->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return root_->exit(e);  // --help (the selected command's help) or --version, on stdout
    const CLI::App* app = SelectedApp(root_.get());
    return Fail(PathOf(app), absl::StrCat(e.what(), "; `longctx ", PathOf(app), app == root_.get() ? "" : " ",
                                          "--help` lists its flags"));
  }
  CLI::App* app = SelectedApp(root_.get());
  const std::string path = PathOf(app);
  for (const CLI::App* a = app->get_parent(); a != nullptr; a = a->get_parent()) {
    const std::vector<std::string> given = GivenOptions(a);
    if (!given.empty())
      return Fail(path, absl::StrCat(absl::StrJoin(given, ", "), " given before '", app->get_name(),
                                     "': the flags of '", path, "' go after the whole command"));
  }
  // After `--` CLI11 stops the command's parse and hands what follows to the
  // parents, where nothing read it: `train --steps=2 -- --steps=5` trained 2
  // steps without a word. No command takes positional arguments, so refuse.
  std::vector<std::string> after_dashes;
  for (const CLI::App* a = app->get_parent(); a != nullptr; a = a->get_parent()) {
    const std::vector<std::string> r = a->remaining();
    after_dashes.insert(after_dashes.begin(), r.begin(), r.end());
  }
  if (!after_dashes.empty())
    return Fail(path, absl::StrCat("arguments after '--' (", absl::StrJoin(after_dashes, " "), "): '", path,
                                   "' takes no positional arguments; give its flags before any '--', without it"));
  const Entry* e = EntryOf(app);
  const std::vector<std::string> rest = app->remaining();
  if (e == nullptr || !e->spec.run) {  // no command, or a group without its subcommand
    const std::string parents = app == root_.get() ? "" : PathOf(app->get_parent());
    std::fprintf(stderr, "%s", app->help(parents.empty() ? "longctx" : "longctx " + parents).c_str());
    if (rest.empty()) return 1;
    if (absl::StartsWith(rest[0], "-"))
      return Fail(path, absl::StrCat("unknown flag ", rest[0], ": give the command first"));
    Fail(path, absl::StrCat("unknown command '", path.empty() ? "" : path + " ", rest[0], "'"));
    return 2;
  }
  std::vector<std::string> overrides;
  if (absl::Status st = CollectOverrides(*e, rest, &overrides); !st.ok()) return Fail(path, std::string(st.message()));
  return e->spec.run(overrides);
}

}  // namespace longctx::cli
