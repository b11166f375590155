// Errors thrown from helpers and of kinds the first program does not throw: TORCH_CHECK_NOT_IMPLEMENTED,
// TORCH_INTERNAL_ASSERT, std::overflow_error, std::logic_error, a std::string and a const char*.
#include <torch/extension.h>

#include <stdexcept>
#include <string>

static void deep(int64_t which) {
    if (which == 0) TORCH_CHECK_NOT_IMPLEMENTED(false, "not implemented v", @V@);
    if (which == 1) TORCH_INTERNAL_ASSERT(which == 99, "internal v", @V@);
    if (which == 2) throw std::overflow_error("overflow v" + std::to_string(@V@));
    if (which == 3) throw std::logic_error("logic v" + std::to_string(@V@));
    if (which == 4) throw std::string("a string v@V@");
    if (which == 5) throw "a literal v@V@";
    if (which == 6) TORCH_CHECK(false);
}

int64_t raise_from_helper(int64_t which) {
    deep(which);
    return which + @V@;
}

torch::Tensor checked_shape(const torch::Tensor& x) {
    TORCH_CHECK(x.dim() == 2, "expected 2-D, got ", x.sizes());
    return x.sum(0) + @V@;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("raise_from_helper", &raise_from_helper);
    m.def("checked_shape", &checked_shape);
}
