// add's binding: argument checks, the op registration (torch.ops.jitload.add with CPU, CUDA, Meta and
// Autograd kernels) and the seed's pybind function. The kernels it calls are torch-free (add.h).
#include "jk_torch.h"

#include "add.h"

at::Tensor add(const at::Tensor& a, const at::Tensor& b) {
    jk::check_like("add", a, "a", b, "b");
    jk::check_same_shape("add", a, "a", b, "b");
    jk::check_device_supported("add", a);
    const jk::DType dtype = jk::dtype_of("add", a);
    // Non-contiguous inputs are copied once: the kernels read flat memory.
    const at::Tensor ac = a.contiguous(), bc = b.contiguous();
    at::Tensor out = at::empty_like(ac);
    if (a.is_meta() || out.numel() == 0) {  // Meta: shape and dtype only, for fake tensors and torch.compile
        return out;
    }
    if (a.is_cuda()) {
#ifdef JITLOAD_WITH_CUDA
        const c10::cuda::CUDAGuard guard(a.device());
        jk::check_launch("add", add_cuda(dtype, ac.data_ptr(), bc.data_ptr(), out.data_ptr(), out.numel(), jk::stream()));
#endif
    } else {
        add_cpu(dtype, ac.data_ptr(), bc.data_ptr(), out.data_ptr(), out.numel());
    }
    return out;
}

// The seed's C++ autograd Function: d(a + b)/da = d(a + b)/db = 1.
struct AddFunction : public torch::autograd::Function<AddFunction> {
    static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& a, const at::Tensor& b) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;  // run the CPU/CUDA kernel, not this one again
        static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("jitload::add", "")
                                   .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
        return op.call(a, b);
    }
    static torch::autograd::tensor_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::tensor_list grads) {
        return {grads[0], grads[0]};
    }
};

at::Tensor add_autograd(const at::Tensor& a, const at::Tensor& b) { return AddFunction::apply(a, b); }

TORCH_LIBRARY_FRAGMENT(jitload, m) {
    if (!jk::define(m, "add(Tensor a, Tensor b) -> Tensor")) return;
    JK_IMPL_CPU_CUDA(m, "add", add);
    m.impl("add", torch::dispatch(c10::DispatchKey::Meta, TORCH_FN(add)));
    m.impl("add", torch::dispatch(c10::DispatchKey::Autograd, TORCH_FN(add_autograd)));
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("add", &add, "out = a + b for two tensors of one shape and dtype (CPU or CUDA), no autograd");
}
