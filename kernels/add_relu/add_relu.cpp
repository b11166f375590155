// add_relu's binding: checks, and three ops in torch.ops.jitload:
//   add_relu(x, y, version=3)        autograd by the seed's C++ torch::autograd::Function (below)
//   add_relu_backward(grad, x, y)    grad * (x + y > 0), the gradient of x and of y
//   add_relu_py(x, y, version=3)     the same forward with no C++ autograd: autograd.py gives it one with
//                                    torch.library.register_autograd (the Python route)
#include "jk_torch.h"

#include "add_relu.h"

namespace {

void check_inputs(const char* op, const at::Tensor& x, const at::Tensor& y) {
    jk::check_like(op, x, "x", y, "y");
    jk::check_same_shape(op, x, "x", y, "y");
    jk::check_device_supported(op, x);
}

at::Tensor add_relu(const at::Tensor& x, const at::Tensor& y, int64_t version) {
    check_inputs("add_relu", x, y);
    TORCH_CHECK(version >= jk::kNaive && version <= jk::kVectorized, "add_relu: version must be 1 (naive), "
                "2 (grid-stride) or 3 (vectorised), got ", version);
    const jk::DType dtype = jk::dtype_of("add_relu", x);
    const at::Tensor xc = x.contiguous(), yc = y.contiguous();
    at::Tensor out = at::empty_like(xc);
    if (x.is_meta() || out.numel() == 0) return out;
    if (x.is_cuda()) {
#ifdef JITLOAD_WITH_CUDA
        const c10::cuda::CUDAGuard guard(x.device());
        jk::check_launch("add_relu", add_relu_forward_cuda(dtype, xc.data_ptr(), yc.data_ptr(), out.data_ptr(),
                                                           out.numel(), static_cast<int>(version), jk::stream()));
#endif
    } else {
        add_relu_forward_cpu(dtype, xc.data_ptr(), yc.data_ptr(), out.data_ptr(), out.numel());
    }
    return out;
}

at::Tensor add_relu_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& y) {
    check_inputs("add_relu_backward", x, y);
    jk::check_like("add_relu_backward", x, "x", grad, "grad");
    jk::check_same_shape("add_relu_backward", x, "x", grad, "grad");
    const jk::DType dtype = jk::dtype_of("add_relu_backward", x);
    const at::Tensor gc = grad.contiguous(), xc = x.contiguous(), yc = y.contiguous();
    at::Tensor grad_in = at::empty_like(xc);
    if (x.is_meta() || grad_in.numel() == 0) return grad_in;
    if (x.is_cuda()) {
#ifdef JITLOAD_WITH_CUDA
        const c10::cuda::CUDAGuard guard(x.device());
        jk::check_launch("add_relu_backward", add_relu_backward_cuda(dtype, gc.data_ptr(), xc.data_ptr(), yc.data_ptr(),
                                                                     grad_in.data_ptr(), grad_in.numel(), jk::stream()));
#endif
    } else {
        add_relu_backward_cpu(dtype, gc.data_ptr(), xc.data_ptr(), yc.data_ptr(), grad_in.data_ptr(), grad_in.numel());
    }
    return grad_in;
}

// Calls go through the dispatcher, so under torch.compile the traced graph holds jitload ops, not this code.
at::Tensor call_forward(const at::Tensor& x, const at::Tensor& y, int64_t version) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("jitload::add_relu", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t)>();
    return op.call(x, y, version);
}

at::Tensor call_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& y) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("jitload::add_relu_backward", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>();
    return op.call(grad, x, y);
}

// The seed's C++ autograd Function, with a real backward kernel.
struct AddReluFunction : public torch::autograd::Function<AddReluFunction> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& y,
                              int64_t version) {
        ctx->save_for_backward({x, y});
        at::AutoDispatchBelowADInplaceOrView below_autograd;  // run the CPU/CUDA kernel, not this one again
        return call_forward(x, y, version);
    }
    static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::tensor_list grads) {
        const auto saved = ctx->get_saved_variables();
        const at::Tensor grad_in = call_backward(grads[0], saved[0], saved[1]);
        return {grad_in, grad_in, at::Tensor()};  // no gradient for version
    }
};

at::Tensor add_relu_autograd(const at::Tensor& x, const at::Tensor& y, int64_t version) {
    return AddReluFunction::apply(x, y, version);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(jitload, m) {
    if (jk::define(m, "add_relu(Tensor x, Tensor y, int version=3) -> Tensor")) {
        JK_IMPL_CPU_CUDA(m, "add_relu", add_relu);
        m.impl("add_relu", torch::dispatch(c10::DispatchKey::Meta, TORCH_FN(add_relu)));
        m.impl("add_relu", torch::dispatch(c10::DispatchKey::Autograd, TORCH_FN(add_relu_autograd)));
    }
    if (jk::define(m, "add_relu_backward(Tensor grad, Tensor x, Tensor y) -> Tensor")) {
        JK_IMPL_CPU_CUDA(m, "add_relu_backward", add_relu_backward);
        m.impl("add_relu_backward", torch::dispatch(c10::DispatchKey::Meta, TORCH_FN(add_relu_backward)));
    }
    if (jk::define(m, "add_relu_py(Tensor x, Tensor y, int version=3) -> Tensor")) {
        JK_IMPL_CPU_CUDA(m, "add_relu_py", add_relu);
        m.impl("add_relu_py", torch::dispatch(c10::DispatchKey::Meta, TORCH_FN(add_relu)));
    }
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("add_relu", &add_relu, "relu(x + y) in one pass, no autograd", py::arg("x"), py::arg("y"),
          py::arg("version") = 3);
    m.def("add_relu_backward", &add_relu_backward, "grad * (x + y > 0)", py::arg("grad"), py::arg("x"), py::arg("y"));
}
