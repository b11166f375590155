// An op library (is_python_module=False): a schema and CPU kernels, called through torch.ops.
#include <torch/library.h>
#include <ATen/ATen.h>

namespace host_oracle_ops {

at::Tensor muladd_cpu(const at::Tensor& a, const at::Tensor& b, double c) {
    TORCH_CHECK(a.sizes() == b.sizes(), "muladd: shapes differ, v", @V@);
    return a * b + c * @V@;
}

at::Tensor clamp_cpu(const at::Tensor& x, int64_t limit) {
    TORCH_CHECK_VALUE(limit >= 0, "clamp: limit must be >= 0, got ", limit);
    return x.clamp(-limit, limit + @V@);
}

TORCH_LIBRARY(host_oracle_ops, m) {
    m.def("muladd(Tensor a, Tensor b, float c) -> Tensor");
    m.def("clamp_to(Tensor x, int limit) -> Tensor");
}

TORCH_LIBRARY_IMPL(host_oracle_ops, CPU, m) {
    m.impl("muladd", &muladd_cpu);
    m.impl("clamp_to", &clamp_cpu);
}

}  // namespace host_oracle_ops
