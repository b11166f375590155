// rmsnorm's binding: torch.ops.jitload.rmsnorm(x, residual, weight, eps=1e-6) -> (out, new_residual), the
// residual add and RMSNorm of a transformer block in one kernel. Forward only: backprop through it is a clear error.
#include "jk_torch.h"

#include "rmsnorm.h"

namespace {

std::tuple<at::Tensor, at::Tensor> rmsnorm(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                                           double eps) {
    constexpr const char* op = "rmsnorm";
    jk::check_like(op, x, "x", residual, "residual");
    jk::check_like(op, x, "x", weight, "weight");
    jk::check_same_shape(op, x, "x", residual, "residual");
    jk::check_device_supported(op, x);
    TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension (rows are normalised along the last)");
    TORCH_CHECK(weight.dim() == 1 && weight.sym_size(0) == x.sym_size(-1), op, ": weight must be 1-D with ",
                x.sym_size(-1), " elements (x's last dimension), got shape ", weight.sym_sizes());
    TORCH_CHECK(eps >= 0, op, ": eps must be non-negative, got ", eps);
    const jk::DType dtype = jk::dtype_of(op, x);
    const at::Tensor xc = x.contiguous(), rc = residual.contiguous(), wc = weight.contiguous();
    at::Tensor out = at::empty_like(xc), new_residual = at::empty_like(xc);
    if (x.is_meta() || out.numel() == 0) return {out, new_residual};
    const int64_t width = x.size(-1), rows = out.numel() / width;
    if (x.is_cuda()) {
#ifdef JITLOAD_WITH_CUDA
        const c10::cuda::CUDAGuard guard(x.device());
        jk::check_launch(op, rmsnorm_cuda(dtype, xc.data_ptr(), rc.data_ptr(), wc.data_ptr(), out.data_ptr(),
                                          new_residual.data_ptr(), rows, width, eps, jk::stream()));
#endif
    } else {
        rmsnorm_cpu(dtype, xc.data_ptr(), rc.data_ptr(), wc.data_ptr(), out.data_ptr(), new_residual.data_ptr(), rows,
                    width, eps);
    }
    return {out, new_residual};
}

std::tuple<at::Tensor, at::Tensor> rmsnorm_autograd(const at::Tensor& x, const at::Tensor& residual,
                                                    const at::Tensor& weight, double eps) {
    jk::forbid_grad("rmsnorm", {x, residual, weight});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("jitload::rmsnorm", "")
        .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>();
    return op.call(x, residual, weight, eps);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(jitload, m) {
    if (jk::define(m, "rmsnorm(Tensor x, Tensor residual, Tensor weight, float eps=1e-06) -> (Tensor, Tensor)")) {
        JK_IMPL_CPU_CUDA(m, "rmsnorm", rmsnorm);
        m.impl("rmsnorm", torch::dispatch(c10::DispatchKey::Meta, TORCH_FN(rmsnorm)));
        m.impl("rmsnorm", torch::dispatch(c10::DispatchKey::Autograd, TORCH_FN(rmsnorm_autograd)));
    }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    // The handle checks grad as the op's Autograd kernel does, then runs this library's kernel (not the
    // dispatcher's, which keeps an older library's after a schema change).
    m.def("rmsnorm",
          [](const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, double eps) {
              jk::forbid_grad("rmsnorm", {x, residual, weight});
              return rmsnorm(x, residual, weight, eps);
          },
          "(out, x + residual): RMSNorm of x + residual over the last dimension (forward only)", py::arg("x"),
          py::arg("residual"), py::arg("weight"), py::arg("eps") = 1e-6);
}
