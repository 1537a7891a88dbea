// Why: the little of kernels/backend.h that is code, in the interface library
// (longctx_tensor) so that whoever holds a Backend can use it without linking
// any backend.
#include "kernels/backend.h"

namespace longctx {

ScopedBackendThreads::ScopedBackendThreads(Backend* backend, int threads) : backend_(backend) {
  if (threads <= 0) return;
  saved_ = backend_->options().threads;
  absl::Status st = backend_->SetThreads(threads);
  active_ = st.ok();
}

ScopedBackendThreads::~ScopedBackendThreads() {
  if (active_) (void)backend_->SetThreads(saved_);
}

}  // namespace longctx
