// Output written by C++ (C stdio and iostreams, to stdout and stderr, with and without a newline) and torch's
// warnings, from the function itself and from a helper.
#include <torch/extension.h>

#include <cstdio>
#include <iostream>

static void helper_says(const char* what) { std::printf("[helper v@V@] %s\n", what); }

torch::Tensor noisy(const torch::Tensor& x) {
    std::puts("puts line");
    std::printf("partial");
    std::cout << " cout " << x.numel() << '\n';
    std::cerr << "cerr v@V@";
    helper_says("done");
    TORCH_WARN_ONCE("warn once v", @V@);
    TORCH_WARN("warn every time v", @V@, " numel=", x.numel());
    return x + @V@;
}

void only_stderr(int64_t n) {
    for (int64_t i = 0; i < n; ++i) std::fprintf(stderr, "line %lld\n", (long long)i);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("noisy", &noisy);
    m.def("only_stderr", &only_stderr);
}
