// Why: see device_batch.h.
#include "train/device_batch.h"

namespace longctx {

BatchTensors DeviceBatch::Upload(const PackedBatch& batch) {
  const int64_t n = static_cast<int64_t>(batch.inputs.size());
  if (n > capacity_) {
    capacity_ = n;
    inputs_ = DeviceBuffer(backend_, n * 4);
    targets_ = DeviceBuffer(backend_, n * 4);
    positions_ = DeviceBuffer(backend_, n * 4);
    cu_seqlens_ = DeviceBuffer(backend_, (n + 1) * 4);
  }
  const Device dev = backend_->device();
  BatchTensors t;
  t.inputs = Tensor(inputs_.data(), DType::kI32, {n}, dev);
  t.targets = Tensor(targets_.data(), DType::kI32, {n}, dev);
  t.positions = Tensor(positions_.data(), DType::kI32, {n}, dev);
  t.cu_seqlens = Tensor(cu_seqlens_.data(), DType::kI32, {static_cast<int64_t>(batch.cu_seqlens.size())}, dev);
  backend_->CopyFromHost(t.inputs, batch.inputs.data());
  backend_->CopyFromHost(t.targets, batch.targets.data());
  backend_->CopyFromHost(t.positions, batch.positions.data());
  backend_->CopyFromHost(t.cu_seqlens, batch.cu_seqlens.data());
  return t;
}

}  // namespace longctx
