// softmax's binding: torch.ops.jitload.softmax(x) over the last dimension. Forward only: backprop through
// it is a clear error rather than a silently missing gradient.
#include "jk_torch.h"

#include "softmax.h"

namespace {

at::Tensor softmax(const at::Tensor& x) {
    constexpr const char* op = "softmax";
    jk::check_device_supported(op, x);
    TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension (softmax runs along the last)");
    const jk::DType dtype = jk::dtype_of(op, x);
    const at::Tensor xc = x.contiguous();
    at::Tensor out = at::empty_like(xc);
    if (x.is_meta() || out.numel() == 0) return out;
    const int64_t width = x.size(-1), rows = out.numel() / width;
    if (x.is_cuda()) {
#ifdef JITLOAD_WITH_CUDA
        const c10::cuda::CUDAGuard guard(x.device());
        jk::check_launch(op, softmax_cuda(dtype, xc.data_ptr(), out.data_ptr(), rows, width, jk::stream()));
#endif
    } else {
        softmax_cpu(dtype, xc.data_ptr(), out.data_ptr(), rows, width);
    }
    return out;
}

at::Tensor softmax_autograd(const at::Tensor& x) {
    jk::forbid_grad("softmax", {x});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("jitload::softmax", "")
                               .typed<at::Tensor(const at::Tensor&)>();
    return op.call(x);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(jitload, m) {
    if (jk::define(m, "softmax(Tensor x) -> Tensor")) {
        JK_IMPL_CPU_CUDA(m, "softmax", softmax);
        m.impl("softmax", torch::dispatch(c10::DispatchKey::Meta, TORCH_FN(softmax)));
        m.impl("softmax", torch::dispatch(c10::DispatchKey::Autograd, TORCH_FN(softmax_autograd)));
    }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    // The handle checks grad as the op's Autograd kernel does, then runs this library's kernel (not the
    // dispatcher's, which keeps an older library's after a schema change).
    m.def("softmax", [](const at::Tensor& x) { jk::forbid_grad("softmax", {x}); return softmax(x); },
          "softmax over the last dimension, in one pass over the data (forward only)", py::arg("x"));
}
