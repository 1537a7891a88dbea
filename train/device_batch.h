// Why: the packer builds batches in host memory; the model reads them from
// backend memory. DeviceBatch owns backend buffers sized once for the largest
// batch and re-fills them each step (no allocation per step).
#ifndef LONGCTX_TRAIN_DEVICE_BATCH_H_
#define LONGCTX_TRAIN_DEVICE_BATCH_H_

#include "data/packer.h"
#include "kernels/backend.h"
#include "model/transformer.h"

namespace longctx {

class DeviceBatch {
 public:
  explicit DeviceBatch(Backend* backend) : backend_(backend) {}
  // Copies the batch into backend memory and returns views of it.
  BatchTensors Upload(const PackedBatch& batch);

 private:
  Backend* backend_;
  int64_t capacity_ = 0;
  DeviceBuffer inputs_, targets_, positions_, cu_seqlens_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_DEVICE_BATCH_H_
