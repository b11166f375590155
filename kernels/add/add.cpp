// add's binding: checks the tensors, picks the device, and calls the torch-free kernel or its CPU twin.
#include <torch/extension.h>
#ifdef JITLOAD_WITH_CUDA
// c10's stream and guard headers, not ATen/cuda/CUDAContext.h: they need no cuBLAS/cuSPARSE headers.
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "add.h"

torch::Tensor add(const torch::Tensor& a, const torch::Tensor& b) {
    TORCH_CHECK(a.device() == b.device(), "add: a is on ", a.device(), " but b is on ", b.device());
    TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat,
                "add: expected two float32 tensors, got ", a.scalar_type(), " and ", b.scalar_type());
    TORCH_CHECK(a.sizes() == b.sizes(), "add: shape mismatch, a is ", a.sizes(), " and b is ", b.sizes());
    const torch::Tensor ac = a.contiguous();
    const torch::Tensor bc = b.contiguous();
    torch::Tensor out = torch::empty_like(ac);
    const int64_t n = out.numel();
    if (n == 0) {
        return out;
    }
    if (a.is_cuda()) {
#ifdef JITLOAD_WITH_CUDA
        const c10::cuda::CUDAGuard guard(a.device());
        C10_CUDA_CHECK(add_cuda(ac.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(), n,
                                c10::cuda::getCurrentCUDAStream()));
#else
        TORCH_CHECK(false, "add: this build has no CUDA kernel (no CUDA toolkit was found when it was built)");
#endif
    } else {
        TORCH_CHECK(a.is_cpu(), "add: unsupported device ", a.device());
        add_cpu(ac.data_ptr<float>(), bc.data_ptr<float>(), out.data_ptr<float>(), n);
    }
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("add", &add, "out = a + b for two float32 tensors of one shape (CPU or CUDA)");
}
