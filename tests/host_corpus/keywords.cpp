// Keyword names and default values on the bindings (py::arg).
#include <torch/extension.h>

torch::Tensor scaled(const torch::Tensor& x, double alpha, bool negate) {
    auto y = x * alpha + @V@;
    return negate ? -y : y;
}
int64_t offset(int64_t a, int64_t b) { return a - b + @V@; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("scaled", &scaled, py::arg("x"), py::arg("alpha") = 2.0, py::arg("negate") = false, "x * alpha + V");
    m.def("offset", &offset, py::arg("a"), py::arg("b") = 1);
}
