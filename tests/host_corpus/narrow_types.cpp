// Integer and floating types narrower or wider than Python's: short, char, int8_t, long, size_t, long double,
// and a float parameter given a double it cannot hold exactly.
#include <torch/extension.h>

#include <cstdint>

short add_short(short a) { return static_cast<short>(a + @V@); }
int8_t add_int8(int8_t a) { return static_cast<int8_t>(a + @V@); }
char next_char(char c) { return static_cast<char>(c + @V@); }
long add_long(long a) { return a + @V@; }
size_t size_of(const torch::Tensor& x) { return static_cast<size_t>(x.numel()) + @V@; }
unsigned wrap_unsigned(int a) { return static_cast<unsigned>(a - @V@); }
double through_float(float x) { return static_cast<double>(x) + @V@ * 0.0; }
long double wide(double x) { return static_cast<long double>(x) / 3 + @V@; }
uint64_t max_u64() { return UINT64_MAX - @V@; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("add_short", &add_short);
    m.def("add_int8", &add_int8);
    m.def("next_char", &next_char);
    m.def("add_long", &add_long);
    m.def("size_of", &size_of);
    m.def("wrap_unsigned", &wrap_unsigned);
    m.def("through_float", &through_float);
    m.def("wide", &wide);
    m.def("max_u64", &max_u64);
}
