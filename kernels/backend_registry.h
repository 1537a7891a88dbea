// Why: the one place that knows which backends exist. Backend names ("cpu",
// "cuda") and each backend's own options meet here, so the interface every
// backend shares (kernels/backend.h) names none of them and a caller above
// kernels/ never compares a backend's name: it asks FindBackend what a name
// is (known? where do its tensors live?) and MakeBackend for one. Only the top
// layer (train/) and the binaries include this header; model code never does.
#ifndef LONGCTX_KERNELS_BACKEND_REGISTRY_H_
#define LONGCTX_KERNELS_BACKEND_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/tensor.h"

namespace longctx {

// What MakeBackend takes: the options every backend understands, plus each
// backend's own. A backend given another backend's options that differ from
// their defaults refuses them (the CPU's GEMM library on the CUDA backend is
// an InvalidArgument naming it), so a flag never silently does nothing.
struct BackendSettings : BackendOptions {
  CpuBackendOptions cpu;  // the "cpu" backend's own (kernels/cpu/cpu_backend.h)
};

// What a backend name stands for, without making the backend (no device
// needed, nothing linked): the config check, the memory check and the choice
// of communicator ask this.
struct BackendInfo {
  std::string name;
  Device device = Device::kCpu;  // where its tensors live (kCpu: host memory)
};
// NotFound "unknown backend 'x' (expected cpu or cuda)" for a name no build knows
// (backend_info.cc: the one table of names, also in builds without backends).
absl::StatusOr<BackendInfo> FindBackend(std::string_view name);
// The known names, quoted, for messages: "\"cpu\" or \"cuda\"".
std::string KnownBackendNames();

// The backend `name` made with `settings`. NotFound for an unknown name,
// Unavailable with a reason when it is not built or has no device,
// InvalidArgument for options it cannot take.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name, const BackendSettings& settings = {});

// The operand copies the bf16 products of backend `name` made with `settings`
// keep (its Backend::bf16_operand_copies), known without making it: the
// memory plan of a run on a machine that has no such device. NotFound for an
// unknown name.
absl::StatusOr<Bf16OperandCopies> BackendBf16OperandCopies(std::string_view name, const BackendSettings& settings = {});

}  // namespace longctx

#endif  // LONGCTX_KERNELS_BACKEND_REGISTRY_H_
