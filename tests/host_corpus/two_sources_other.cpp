// The second source of two_sources: flavour() here is the header's without FLAVOUR_A.
#include "shared_flavour.h"

#include <torch/extension.h>

int64_t from_other() { return flavour() * 100 + @W@; }
torch::Tensor other_scale(const torch::Tensor& x) { return x * flavour() + @W@; }
