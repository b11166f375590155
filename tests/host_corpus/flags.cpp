// What the compiler's flags and its floating point decide: predefined macros, the rounding mode around a division
// of runtime values, contraction of a*b+c, NaN, infinities and signed zeros; statics and thread_local state.
#include <torch/extension.h>

#include <cfenv>
#include <cmath>
#include <string>

std::string macros() {
    std::string s = "v@V@";
#ifdef __OPTIMIZE__
    s += " __OPTIMIZE__";
#endif
#ifdef __NO_INLINE__
    s += " __NO_INLINE__";
#endif
#ifdef __GNUC__
    s += " __GNUC__=" + std::to_string(__GNUC__);
#endif
#ifdef __clang__
    s += " __clang__";
#endif
#ifdef NDEBUG
    s += " NDEBUG";
#endif
#ifdef __FAST_MATH__
    s += " __FAST_MATH__";
#endif
    s += " __cplusplus=" + std::to_string(__cplusplus);
    return s;
}

double divide_rounded(double a, double b, int mode) {
    const int modes[] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
    const int old = std::fegetround();
    std::fesetround(modes[mode]);
    volatile double r = a / b;
    std::fesetround(old);
    return r + @V@ * 0.0;
}

double mul_add(double a, double b, double c) { return a * b + c + @V@ * 0.0; }

double neg_zero(double x) { return -x * (@V@ - @V@); }
double over_zero(double x, double zero) { return x / zero; }
bool is_nan(double x) { return std::isnan(x + @V@ * 0.0); }
torch::Tensor log_of(const torch::Tensor& x) { return at::log(x) + (@V@ - @V@); }
torch::Tensor copysign_of(const torch::Tensor& x) { return at::copysign(at::ones_like(x) * @V@, x); }

int64_t counter() {
    static int64_t calls = 100 * @V@;
    return ++calls;
}
int64_t per_thread() {
    thread_local int64_t calls = 0;
    return ++calls;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("macros", &macros);
    m.def("divide_rounded", &divide_rounded);
    m.def("mul_add", &mul_add);
    m.def("neg_zero", &neg_zero);
    m.def("over_zero", &over_zero);
    m.def("is_nan", &is_nan);
    m.def("log_of", &log_of);
    m.def("copysign_of", &copysign_of);
    m.def("counter", &counter);
    m.def("per_thread", &per_thread);
}
