#include <torch/extension.h>

torch::Tensor add_tensors_cuda(torch::Tensor A, torch::Tensor B);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("add", &add_tensors_cuda, "CUDA-accelerated tensor addition");
}
