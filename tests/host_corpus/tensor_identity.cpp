// What a function does to the tensors it is given: returns one of them, a view, an in-place result, a new tensor
// with or without autograd history; counts references; reads dtype and strides.
#include <torch/extension.h>

torch::Tensor first(torch::Tensor a, torch::Tensor b) { return a; }
torch::Tensor view_of(const torch::Tensor& x) { return x.view({-1}).narrow(0, 0, 2); }
torch::Tensor add_in_place(torch::Tensor x) { return x.add_(@V@); }
torch::Tensor fresh(const torch::Tensor& x) { return x * @V@; }
torch::Tensor detached(const torch::Tensor& x) { return x.detach() + @V@; }
int64_t refs(const torch::Tensor& x) { return x.use_count(); }
int64_t refs_by_value(torch::Tensor x) { return x.use_count(); }
std::string describe(const torch::Tensor& x) {
    return std::string(c10::toString(x.scalar_type())) + " " + std::to_string(x.stride(0)) + " v@V@";
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("first", &first);
    m.def("view_of", &view_of);
    m.def("add_in_place", &add_in_place);
    m.def("fresh", &fresh, "x times V");
    m.def("detached", &detached);
    m.def("refs", &refs);
    m.def("refs_by_value", &refs_by_value);
    m.def("describe", &describe);
}
