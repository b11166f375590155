// What crosses the Python boundary: scalar, string, vector, device, optional and tuple types, keyword arguments,
// the exceptions torch and the standard library throw, printed output and warnings, tensor identity.
#include <torch/extension.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

int add_int(int a, int b) { return a + b + @V@; }
int64_t add_i64(int64_t a) { return a * 3 + @V@; }
unsigned add_unsigned(unsigned a) { return a + @V@u; }
uint64_t above_int64_max(uint64_t a) { return (uint64_t(1) << 63) + a + @V@; }
float half_float(float x) { return x / 2 + @V@; }
double third_double(double x) { return x / 3 + @V@; }
bool above(double x) { return x > @V@; }
std::string greet(const std::string& who) { return "hello " + who + " v" + std::to_string(@V@); }
std::vector<std::string> words(int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back("w" + std::to_string(i * @V@));
    return out;
}
std::vector<int64_t> sizes_plus(const torch::Tensor& x) {
    auto s = x.sizes().vec();
    s.push_back(@V@);
    return s;
}
at::Device device_of(const torch::Tensor& x) { return x.device(); }
torch::Tensor maybe_add(const torch::Tensor& x, c10::optional<torch::Tensor> y) {
    return y.has_value() ? x + *y : x * @V@;
}
torch::Tensor maybe_mul(const torch::Tensor& x, std::optional<torch::Tensor> y) {
    return y ? x * *y : x + @V@;
}
std::tuple<torch::Tensor, torch::Tensor> min_max(const torch::Tensor& x) { return {x.min(), x.max() + @V@}; }
std::vector<torch::Tensor> pieces(const torch::Tensor& x, int64_t n) { return x.chunk(n); }

void fail(int which) {
    switch (which) {
        case 0: TORCH_CHECK(which > 0, "check failed, v", @V@, " got ", which);
        case 1: TORCH_CHECK_TYPE(false, "wrong type v", @V@);
        case 2: TORCH_CHECK_VALUE(false, "wrong value v", @V@);
        case 3: TORCH_CHECK_INDEX(false, "wrong index v", @V@);
        case 4: throw std::runtime_error("runtime v" + std::to_string(@V@));
        case 5: throw std::invalid_argument("invalid v" + std::to_string(@V@));
        case 6: throw std::out_of_range("out of range v" + std::to_string(@V@));
        case 7: throw @V@;
        default: return;
    }
}

int64_t shout(int64_t n) {
    std::printf("printf %lld v@V@\n", (long long)n);
    std::printf("no newline ");
    std::cout << "cout " << n << std::endl;
    std::fprintf(stderr, "stderr %lld\n", (long long)n);
    std::cerr << "cerr " << n << "\n";
    TORCH_WARN("careful v", @V@, " n=", n);
    return n;
}

torch::Tensor same(torch::Tensor x) { return x; }
torch::Tensor scaled(const torch::Tensor& x, double alpha) { return x * alpha + @V@; }
int64_t uses(const torch::Tensor& x) { return x.use_count(); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("add_int", &add_int, "a + b + V");
    m.def("add_i64", &add_i64);
    m.def("add_unsigned", &add_unsigned);
    m.def("above_int64_max", &above_int64_max);
    m.def("half_float", &half_float);
    m.def("third_double", &third_double);
    m.def("above", &above);
    m.def("greet", &greet);
    m.def("words", &words);
    m.def("sizes_plus", &sizes_plus);
    m.def("device_of", &device_of);
    m.def("maybe_add", &maybe_add);
    m.def("maybe_mul", &maybe_mul);
    m.def("min_max", &min_max);
    m.def("pieces", &pieces);
    m.def("fail", &fail);
    m.def("shout", &shout);
    m.def("same", &same);
    m.def("scaled", &scaled@SCALED_ARGS@);
    m.def("uses", &uses);
}
