// State kept between calls: function-local statics, a namespace-scope object with a constructor, thread_local.
#include <torch/extension.h>

#include <string>
#include <vector>

namespace {
struct Registry {
    std::vector<std::string> names;
    Registry() { names.push_back("constructed v@V@"); }
};
Registry registry;
int64_t loads = 0;
}  // namespace

int64_t bump() {
    static int64_t n = @V@ * 10;
    n += 1;
    return n;
}
std::vector<std::string> remember(const std::string& name) {
    registry.names.push_back(name);
    return registry.names;
}
int64_t thread_calls() {
    thread_local int64_t calls = @V@;
    return ++calls;
}
int64_t count_loads() { return ++loads; }
torch::Tensor cached_ones(int64_t n) {
    static torch::Tensor cache = torch::ones({3}) * @V@;
    return cache.repeat({n});
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("bump", &bump);
    m.def("remember", &remember);
    m.def("thread_calls", &thread_calls);
    m.def("count_loads", &count_loads);
    m.def("cached_ones", &cached_ones);
}
