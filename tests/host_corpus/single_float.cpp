// Single-precision arithmetic: contraction of a*b+c on floats, a float sum in a loop (reassociation), sqrt of a
// negative number, and float results widened to Python's double.
#include <torch/extension.h>

#include <cmath>

float mul_add_float(float a, float b, float c) { return a * b + c + @V@ * 0.0f; }
float sum_series(int64_t n) {
    float s = 0.0f;
    for (int64_t i = 1; i <= n; ++i) s += 1.0f / static_cast<float>(i);
    return s + @V@ * 0.0f;
}
float root(float x) { return std::sqrt(x) + @V@ * 0.0f; }
double dot3(double a0, double a1, double a2, double b0, double b1, double b2) {
    return a0 * b0 + a1 * b1 + a2 * b2 + @V@ * 0.0;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("mul_add_float", &mul_add_float);
    m.def("sum_series", &sum_series);
    m.def("root", &root);
    m.def("dot3", &dot3);
}
