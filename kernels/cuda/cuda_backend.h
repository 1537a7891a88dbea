// Why: how the registry (kernels/backend_registry.cc) makes the CUDA backend,
// declared in the CUDA backend's own folder so kernels/backend.h names no
// backend. Only built with -DLONGCTX_CUDA=ON; the CUDA backend takes the
// options every backend understands and none of its own.
#ifndef LONGCTX_KERNELS_CUDA_CUDA_BACKEND_H_
#define LONGCTX_KERNELS_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace longctx {

// The CUDA backend on the current device. InvalidArgument for negative
// threads, Unavailable (with cudaGetDeviceCount's reason) when there is no
// usable device.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const BackendOptions& options = {});

}  // namespace longctx

#endif  // LONGCTX_KERNELS_CUDA_CUDA_BACKEND_H_
