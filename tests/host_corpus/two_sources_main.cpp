// One extension of two sources: this one defines FLAVOUR_A before the shared header, the other does not.
#define FLAVOUR_A
#include "shared_flavour.h"

#include <torch/extension.h>

int64_t from_other();
torch::Tensor other_scale(const torch::Tensor& x);

int64_t from_main() { return flavour() * 10 + @V@; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("from_main", &from_main);
    m.def("from_other", &from_other);
    m.def("other_scale", &other_scale);
}
