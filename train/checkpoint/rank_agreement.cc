// Why: see rank_agreement.h. An int64 min all-reduce finds the lowest failing
// rank; that rank broadcasts its code and message.
#include "train/checkpoint/rank_agreement.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace longctx {

absl::Status AgreeOnStatus(Communicator& comm, const absl::Status& local) {
  const int world = comm.world_size();
  if (world == 1) return local;
  int64_t first = local.ok() ? world : comm.rank();
  if (absl::Status st = comm.AllReduceMin(&first, 1); !st.ok()) return st;
  if (first >= world) return absl::OkStatus();
  constexpr size_t kBytes = 4096;
  std::vector<char> msg(kBytes, 0);
  if (comm.rank() == first) {
    const int32_t code = static_cast<int32_t>(local.code());
    std::memcpy(msg.data(), &code, sizeof(code));
    const std::string text(local.message());
    std::memcpy(msg.data() + sizeof(code), text.data(), std::min(text.size(), kBytes - sizeof(code) - 1));
  }
  if (absl::Status st = comm.BroadcastBytes(msg.data(), static_cast<int64_t>(msg.size()), static_cast<int>(first));
      !st.ok())
    return st;
  int32_t code = 0;
  std::memcpy(&code, msg.data(), sizeof(code));
  if (code == 0) code = static_cast<int32_t>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code),
                      absl::StrCat("rank ", first, "/", world, ": ", msg.data() + sizeof(code)));
}

}  // namespace longctx
