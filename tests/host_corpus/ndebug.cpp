// NDEBUG defined by the source itself, before any include: every assert is compiled out, so a call that would fail
// one returns. A build that loses the define aborts the process in that call.
#define NDEBUG
#include <torch/extension.h>

#include <cassert>

bool ndebug_defined() {
#ifdef NDEBUG
    return true;
#else
    return false;
#endif
}

int64_t checked(int64_t x) {
    assert(x > 1000 && "x is too small");
    return x + @V@;
}

torch::Tensor checked_tensor(const torch::Tensor& x) {
    assert(x.dim() == 7);
    return x + @V@;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("ndebug_defined", &ndebug_defined);
    m.def("checked", &checked);
    m.def("checked_tensor", &checked_tensor);
}
