// bias_gelu's binding: checks, and two ops in torch.ops.jitload:
//   bias_gelu(x, bias, approximate="none") -> gelu(x + bias), autograd by a C++ autograd Function
//   bias_gelu_backward(grad, x, bias, approximate="none") -> (grad_x, grad_bias)
// approximate is "none" (erf) or "tanh", as in torch.nn.functional.gelu.
#include "jk_torch.h"

#include <numeric>

#include "bias_gelu.h"

namespace {

bool is_tanh(const char* op, c10::string_view approximate) {
    TORCH_CHECK(approximate == "none" || approximate == "tanh", op, ": approximate must be 'none' or 'tanh', got '",
                std::string(approximate), "'");
    return approximate == "tanh";
}

void check_inputs(const char* op, const at::Tensor& x, const at::Tensor& bias) {
    jk::check_like(op, x, "x", bias, "bias");
    jk::check_device_supported(op, x);
    TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension (bias runs along the last one)");
    TORCH_CHECK(bias.dim() == 1, op, ": bias must be 1-D, got ", bias.dim(), " dimensions");
    TORCH_CHECK(bias.sym_size(0) == x.sym_size(-1), op, ": bias has ", bias.sym_size(0),
                " elements but x's last dimension is ", x.sym_size(-1));
}

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, c10::string_view approximate) {
    check_inputs("bias_gelu", x, bias);
    const bool tanh = is_tanh("bias_gelu", approximate);
    const jk::DType dtype = jk::dtype_of("bias_gelu", x);
    const at::Tensor xc = x.contiguous(), bc = bias.contiguous();
    at::Tensor out = at::empty_like(xc);
    if (x.is_meta() || out.numel() == 0) return out;
    const int64_t width = x.size(-1), rows = out.numel() / width;
    if (x.is_cuda()) {
#ifdef JITLOAD_WITH_CUDA
        const c10::cuda::CUDAGuard guard(x.device());
        jk::check_launch("bias_gelu", bias_gelu_forward_cuda(dtype, xc.data_ptr(), bc.data_ptr(), out.data_ptr(), rows,
                                                             width, tanh, jk::stream()));
#endif
    } else {
        bias_gelu_forward_cpu(dtype, xc.data_ptr(), bc.data_ptr(), out.data_ptr(), rows, width, tanh);
    }
    return out;
}

std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x,
                                                      const at::Tensor& bias, c10::string_view approximate) {
    check_inputs("bias_gelu_backward", x, bias);
    jk::check_like("bias_gelu_backward", x, "x", grad, "grad");
    jk::check_same_shape("bias_gelu_backward", x, "x", grad, "grad");
    const bool tanh = is_tanh("bias_gelu_backward", approximate);
    const jk::DType dtype = jk::dtype_of("bias_gelu_backward", x);
    const at::Tensor gc = grad.contiguous(), xc = x.contiguous(), bc = bias.contiguous();
    at::Tensor grad_x = at::empty_like(xc);
    const auto acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    if (!x.is_meta() && grad_x.numel() > 0) {
        const int64_t width = x.size(-1), rows = grad_x.numel() / width;
        if (x.is_cuda()) {
#ifdef JITLOAD_WITH_CUDA
            const c10::cuda::CUDAGuard guard(x.device());
            if (bias_gelu_backward_fuses(dtype, gc.data_ptr(), xc.data_ptr(), bc.data_ptr(), grad_x.data_ptr(), rows,
                                         width)) {
                // the kernel writes grad_x and each block's column sums; torch adds those up
                const int64_t slots = bias_gelu_sum_slots(dtype, rows, width, tanh);
                at::Tensor partial = at::empty({slots, width}, x.options().dtype(acc));
                jk::check_launch("bias_gelu_backward",
                                 bias_gelu_backward_sum_cuda(dtype, gc.data_ptr(), xc.data_ptr(), bc.data_ptr(),
                                                             grad_x.data_ptr(), partial.data_ptr(), rows, width, slots,
                                                             tanh, jk::stream()));
                return {grad_x, partial.sum(0).to(x.scalar_type())};
            }
            jk::check_launch("bias_gelu_backward", bias_gelu_backward_cuda(dtype, gc.data_ptr(), xc.data_ptr(),
                             bc.data_ptr(), grad_x.data_ptr(), rows, width, tanh, jk::stream()));
#endif
        } else {
            bias_gelu_backward_cpu(dtype, gc.data_ptr(), xc.data_ptr(), bc.data_ptr(), grad_x.data_ptr(), rows, width,
                                   tanh);
        }
    }
    // The bias gradient: grad_x summed over every row, accumulated in float32 (torch's reduction kernel).
    // A 1-D x is one row, and its grad_x is the bias gradient: at::sum over an empty dim list would sum
    // everything into a 0-d tensor.
    if (x.dim() == 1) return {grad_x, grad_x.clone()};
    std::vector<int64_t> dims(x.dim() - 1);
    std::iota(dims.begin(), dims.end(), 0);
    at::Tensor grad_bias = at::sum(grad_x, dims, /*keepdim=*/false, acc).to(x.scalar_type());
    return {grad_x, grad_bias};
}

struct BiasGeluFunction : public torch::autograd::Function<BiasGeluFunction> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias,
                              c10::string_view approximate) {
        ctx->save_for_backward({x, bias});
        ctx->saved_data["approximate"] = std::string(approximate);
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        static const auto fwd = c10::Dispatcher::singleton().findSchemaOrThrow("jitload::bias_gelu", "")
                                    .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>();
        return fwd.call(x, bias, approximate);
    }
    static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::tensor_list grads) {
        const auto saved = ctx->get_saved_variables();
        const std::string approximate = ctx->saved_data["approximate"].toStringRef();
        static const auto bwd = c10::Dispatcher::singleton().findSchemaOrThrow("jitload::bias_gelu_backward", "")
                                    .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                              const at::Tensor&, c10::string_view)>();
        auto [grad_x, grad_bias] = bwd.call(grads[0], saved[0], saved[1], approximate);
        return {grad_x, grad_bias, at::Tensor()};
    }
};

at::Tensor bias_gelu_autograd(const at::Tensor& x, const at::Tensor& bias, c10::string_view approximate) {
    return BiasGeluFunction::apply(x, bias, approximate);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(jitload, m) {
    if (jk::define(m, "bias_gelu(Tensor x, Tensor bias, str approximate=\"none\") -> Tensor")) {
        JK_IMPL_CPU_CUDA(m, "bias_gelu", bias_gelu);
        m.impl("bias_gelu", torch::dispatch(c10::DispatchKey::Meta, TORCH_FN(bias_gelu)));
        m.impl("bias_gelu", torch::dispatch(c10::DispatchKey::Autograd, TORCH_FN(bias_gelu_autograd)));
    }
    if (jk::define(m, "bias_gelu_backward(Tensor grad, Tensor x, Tensor bias, str approximate=\"none\") -> "
                      "(Tensor, Tensor)")) {
        JK_IMPL_CPU_CUDA(m, "bias_gelu_backward", bias_gelu_backward);
        m.impl("bias_gelu_backward", torch::dispatch(c10::DispatchKey::Meta, TORCH_FN(bias_gelu_backward)));
    }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("bias_gelu", [](const at::Tensor& x, const at::Tensor& b, const std::string& a) { return bias_gelu(x, b, a); },
          "gelu(x + bias) in one pass, no autograd", py::arg("x"), py::arg("bias"), py::arg("approximate") = "none");
}
