// Why: see tensorboard_metrics.h.
#include "train/report/tensorboard_metrics.h"

#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "train/report/run_plots.h"

namespace longctx {
namespace {

using Json = nlohmann::json;

bool IsNumber(const Json& j, const char* key) { return j.contains(key) && j[key].is_number(); }

tensorboard::HistogramProto DistanceHistogram(const Json& bins) {
  tensorboard::HistogramProto h;
  double num = 0, sum = 0, sum_sq = 0, lo_min = 0, hi_max = 0;
  bool first = true;
  for (const Json& b : bins) {
    const double lo = b[0].get<double>(), hi = b[1].get<double>(), count = b[2].get<double>();
    // Distances lo..hi-1; bucket (limit[i-1], limit[i]] with limit = hi - 1.
    h.add_bucket_limit(hi - 1);
    h.add_bucket(count);
    const double mid = 0.5 * (lo + hi - 1);
    num += count, sum += count * mid, sum_sq += count * mid * mid;
    // min/max are the data's range (TensorBoard's meaning), not the bins':
    // a sliding-window layer's distances stop at its window.
    if (count <= 0) continue;
    if (first) lo_min = lo, first = false;
    hi_max = hi - 1;
  }
  h.set_min(lo_min);
  h.set_max(hi_max);
  h.set_num(num);
  h.set_sum(sum);
  h.set_sum_squares(sum_sq);
  return h;
}

}  // namespace

absl::Status WriteMetricsEventToTensorBoard(EventFileWriter& w, const Json& ev, const std::string& out_dir) {
  if (!ev.is_object() || !IsNumber(ev, "step")) return absl::OkStatus();
  const std::string kind = ev.value("kind", "");
  const int64_t step = ev["step"].get<int64_t>();
  auto scalar = [&](const std::string& tag, const Json& obj, const char* key) -> absl::Status {
    if (!IsNumber(obj, key)) return absl::OkStatus();
    return w.AddScalar(tag, step, obj[key].get<double>());
  };
  absl::Status st;
  if (kind == "train") {
    for (const auto& [tag, key] : {std::pair{"train/loss", "loss"}, {"train/lr", "lr"},
                                   {"train/grad_norm", "grad_norm"}, {"train/tokens_per_s", "tokens_per_s"},
                                   {"train/seq_len", "seq_len"}, {"train/loss_tokens", "loss_tokens"}})
      if (st = scalar(tag, ev, key); !st.ok()) return st;
  } else if (kind == "eval") {
    return scalar("eval/loss", ev, "loss");
  } else if (kind == "probe") {
    if (st = scalar("probe/effective_length", ev, "effective_length"); !st.ok()) return st;
    if (st = scalar("probe/effective_length_low", ev, "effective_length_low"); !st.ok()) return st;
    if (st = scalar("probe/effective_length_high", ev, "effective_length_high"); !st.ok()) return st;
    for (const Json& l : ev.value("lengths", Json::array())) {
      if (!IsNumber(l, "length")) continue;
      const std::string len = std::to_string(l["length"].get<int64_t>());
      if (st = scalar("probe/pass_rate/len_" + len, l, "pass_rate"); !st.ok()) return st;
      if (st = scalar("probe/pass_low/len_" + len, l, "pass_low"); !st.ok()) return st;
      if (st = scalar("probe/pass_high/len_" + len, l, "pass_high"); !st.ok()) return st;
      if (st = scalar("probe/answer_loss/len_" + len, l, "answer_loss"); !st.ok()) return st;
    }
    for (const Json& c : ev.value("teacher_forced", Json::array())) {
      if (!IsNumber(c, "needles")) continue;
      const std::string k = std::to_string(c["needles"].get<int64_t>());
      for (const Json& l : c.value("lengths", Json::array())) {
        if (!IsNumber(l, "length")) continue;
        const std::string len = std::to_string(l["length"].get<int64_t>());
        if (st = scalar("probe/tf_logprob/needles_" + k + "/len_" + len, l, "logprob"); !st.ok()) return st;
        if (st = scalar("probe/tf_argmax_exact/needles_" + k + "/len_" + len, l, "argmax_exact"); !st.ok()) return st;
      }
    }
    const std::string png_path = absl::StrFormat("%s/probe/step-%08d.png", out_dir, step);
    std::ifstream in(png_path, std::ios::binary);
    if (in) {
      const std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (st = w.AddImagePng("probe/heatmap", step, png); !st.ok()) return st;
    }
  } else if (kind == "loss_by_position") {
    for (const Json& b : ev.value("buckets", Json::array())) {
      if (!IsNumber(b, "lo") || !IsNumber(b, "hi")) continue;
      const std::string tag = absl::StrCat("loss_by_position/pos_", b["lo"].get<int64_t>(), "_", b["hi"].get<int64_t>());
      if (st = scalar(tag, b, "loss"); !st.ok()) return st;
    }
    absl::StatusOr<std::string> png =
        LossByPositionPlotPng({&ev}, absl::StrCat("loss by position at step ", step));
    if (png.ok()) return w.AddImagePng("loss_by_position/plot", step, *png);
    if (!absl::IsNotFound(png.status())) return png.status();
  } else if (kind == "posfreq") {
    bool any = false;
    for (const char* k : {"full", "sliding"}) {
      if (!ev.contains(k)) continue;
      any = true;
      const Json& s = ev[k];
      for (const char* key : {"share_ge_half", "share_ge_three_quarters", "share_le_half"})
        if (st = scalar(absl::StrCat("posfreq/", k, "/", key), s, key); !st.ok()) return st;
      if (s.contains("bins") && !s["bins"].empty())
        if (st = w.AddHistogram(absl::StrCat("posfreq/", k, "/distance"), step, DistanceHistogram(s["bins"])); !st.ok())
          return st;
    }
    if (any) {
      absl::StatusOr<std::string> png = PosfreqPlotPng(ev, absl::StrCat("position frequency at step ", step));
      if (!png.ok()) return png.status();
      return w.AddImagePng("posfreq/plot", step, *png);
    }
  }
  return absl::OkStatus();
}

}  // namespace longctx
