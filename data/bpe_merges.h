// Why: both Llama vocabularies encode by the same BPE loop: start from one
// symbol per character (or byte), then repeatedly merge the adjacent pair with
// the lowest merge rank, the leftmost such pair when one rank occurs several
// times. That is what Hugging Face tokenizers and both reference npm encoders
// do; this is the one implementation of it in longctx.
#ifndef LONGCTX_DATA_BPE_MERGES_H_
#define LONGCTX_DATA_BPE_MERGES_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace longctx {

class BpeMerges {
 public:
  // Appends the merge (left, right) → result with the next rank (0, 1, ...).
  // Adding a pair again gives it the new, later rank (as a JavaScript Map or a
  // Rust HashMap built from the list would).
  void Add(int32_t left, int32_t right, int32_t result);
  int64_t size() const { return static_cast<int64_t>(table_.size()); }

  // Merges *symbols in place until no adjacent pair has a merge.
  void Apply(std::vector<int32_t>* symbols) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  const Merge* Find(int32_t left, int32_t right) const {
    auto it = table_.find(Key(left, right));
    return it == table_.end() ? nullptr : &it->second;
  }
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void ApplySmall(std::vector<int32_t>* symbols) const;
  void ApplyLarge(std::vector<int32_t>* symbols) const;

  absl::flat_hash_map<uint64_t, Merge> table_;
  int32_t next_rank_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_BPE_MERGES_H_
