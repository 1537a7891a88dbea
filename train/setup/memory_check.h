// Why: a config that asks for more memory than the machine has used to die
// deep inside the backend (`CPU allocation of 2084000000000 bytes failed`,
// SIGABRT) or, with num_layers = 1e8, grow until the kernel stepped in. The
// plan (model/plan.h) already knows a run's memory without allocating; this is
// the one check — used by `train` (Trainer::Create) and by every command that
// loads a checkpoint (eval, generate, probe, analyze) — that compares it with
// the machine before the first byte of the model is allocated, and says in
// numbers what does not fit and which field to change.
#ifndef LONGCTX_TRAIN_MEMORY_CHECK_H_
#define LONGCTX_TRAIN_MEMORY_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "model/config.h"
#include "model/plan.h"
#include "train/train.pb.h"

namespace longctx {

enum class MemoryUse {
  kTraining,   // weights, grads, AdamW m and v, activations of one micro-batch (per rank)
  kInference,  // the fp32 weights of a loaded checkpoint
};

// Bytes the process may still allocate: MemAvailable of /proc/meminfo, else
// sysconf(_SC_AVPHYS_PAGES) × page size, capped by the cgroup v2 limit
// (memory.max − memory.current) when there is one; -1 when nothing is known.
int64_t AvailableHostMemory();

// OK when `use` of the model `dims` (with config's data.batch_size ×
// data.seq_len — for SFT (data.sft) the schedule's micro-batch with the
// largest activations, sft_config.h — mode and world for training) times
// `ranks_on_node` fits in
// `available_bytes` (< 0: unknown, always OK). Otherwise ResourceExhausted
// naming the need, the budget, and the field to change (the largest part).
// Arithmetic in double first, so dims whose byte counts overflow int64
// (hidden_size 2e9) are reported, not wrapped. bf16_operands: the operand
// copies of the run's bf16 products (train/trainer.h, Bf16OperandsFor: this
// file does not ask a backend, so the readers' fuzz build links without
// one); training only, none ({}) for inference.
absl::Status CheckMemoryFits(const TrainConfig& config, const ModelDims& dims, MemoryUse use, int world,
                             int ranks_on_node, int64_t available_bytes, const Bf16OperandCopies& bf16_operands);

// CheckMemoryFits against AvailableHostMemory() for a backend whose tensors
// live in host memory (kernels/backend_registry.h, FindBackend; a device's
// memory is not visible from here: no check).
absl::Status CheckMemoryFitsMachine(const TrainConfig& config, const ModelDims& dims, MemoryUse use,
                                    const Bf16OperandCopies& bf16_operands, int world = 1, int ranks_on_node = 1);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_MEMORY_CHECK_H_
