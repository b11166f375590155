"""The host JIT: a host edit runs the interpreter's compile of the sources until the full build replaces it.

Text (no interpreter): launches rewritten, bindings read, what the unit keeps, hoists and refuses.
CPU (cppyy installed): a host edit of a C++ extension is the interpreter's code ('jit'), gives what the full
build of the same sources gives (the full build itself is the oracle: its outputs are compared with the
interpreter's on the same inputs), raises its TORCH_CHECKs, carries autograd, and is replaced by the full
build when that is done; what the JIT cannot take, or a compile error, takes the full build, whose errors
name the file and line; a new process gets a never-built source from the interpreter (started from the PCH of
torch's headers that the first build made), then the full build.
GPU: the seed article's one file, an AT_DISPATCH template and load_inline, each through a host edit, a kernel
edit, a kernel signature changed with its launch, the full build that replaces them, and a new process.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import jitload
from jitload.builder import hostflags, hostjit, hostunit
from jitload.builder.errors import BuildError

CORPUS = os.path.join(os.path.dirname(__file__), "swap_corpus")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_cppyy = pytest.mark.skipif(importlib.util.find_spec("cppyy") is None,
                                 reason="cppyy is not installed (the project's dependencies install it)")


def _unit(tmp_path, text, name="src.cu", **files):
    for fname, body in files.items():
        (tmp_path / fname).write_text(body)
    path = tmp_path / name
    path.write_text(text)
    return hostunit.build([str(path)], "jl_t_1", read=lambda p: open(p).read(), include_dirs=[str(tmp_path)],
                          defines={"TORCH_EXTENSION_NAME": "t"})


# ---- the unit's text ----

@pytest.mark.parametrize(("source", "expected"), [
    ("k<<<g, b>>>(x, n);", "::jitload_rt::launch<k >(g, b)(x, n);"),
    ("ns::k<T, 4><<<blocks, 256, 0, stream>>>(a,\n  b);",
     "::jitload_rt::launch<ns::k<T, 4> >(blocks, 256, 0, stream)(a,\n  b);"),
    ("f(); k <<< dim3(n / 2), 32 >>> (p);", "f(); ::jitload_rt::launch<k >( dim3(n / 2), 32 ) (p);"),
    ('// k<<<1, 1>>>(x) in a comment\nputs("<<<");', '// k<<<1, 1>>>(x) in a comment\nputs("<<<");'),
    ("#define GO(kern) kern<<<1, 1>>>(out)", "#define GO(kern) ::jitload_rt::launch<kern >(1, 1)(out)"),
])
def test_launches_become_calls_of_the_launcher(source, expected):
    assert hostunit.rewrite_launches(source) == expected


def test_a_launch_it_cannot_read_is_refused():
    with pytest.raises(hostunit.Unsupported, match="line 2"):
        hostunit.rewrite_launches("int x;\n(cond ? k1 : k2)<<<1, 1>>>(p);")


def test_unit_keeps_host_code_and_kernel_declarations(tmp_path):
    unit = _unit(tmp_path, textwrap.dedent("""\
        #include <torch/extension.h>
        #include "helpers.h"
        #define BLOCK 256
        __device__ float twice(float v) { return 2 * v; }
        __global__ void k(const float* x, float* y, int n) { y[0] = twice(x[0]); }
        torch::Tensor run(torch::Tensor x) {
            auto y = torch::empty_like(x);
            k<<<1, BLOCK>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
            return y;
        }
        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
            m.doc() = "docs";
            m.def("run", torch::wrap_pybind_function(run), "run it");
            m.def("half", &helper_half);
        }
        """), **{"helpers.h": "#pragma once\n#include <cmath>\ninline double helper_half(double v) { return v / 2; }"})
    code = unit.code
    assert unit.module and unit.has_kernels
    assert code.index("#include <torch/extension.h>") < code.index("namespace jl_t_1 {")
    assert code.index("#include <cmath>") < code.index("namespace jl_t_1 {")  # a user header's toolchain include
    assert "inline double helper_half" in code and "#pragma once" not in code  # the user header, read in place
    assert "twice" not in code.split("namespace jl_t_1 {")[1].split("__global__")[0]  # device function left out
    assert "void k(const float* x, float* y, int n) {}" in code  # the kernel's body left out
    assert "::jitload_rt::launch<k >(1, BLOCK)" in code
    # The module block is pybind11's own code, run on a module the caller makes.
    assert 'void jitload_module_init(::pybind11::module_& m) {\n    m.doc() = "docs";' in code
    assert 'm.def("run", torch::wrap_pybind_function(run), "run it");' in code
    # A define removed by the next edit is gone after the unit, as it was before it.
    assert code.index('#pragma push_macro("BLOCK")') < code.index("#define BLOCK") < code.rindex(
        '#pragma pop_macro("BLOCK")')
    assert f'#line 6 "{tmp_path / "src.cu"}"' in code  # messages name the user's file and line


def test_a_pragma_once_header_of_two_sources_is_read_once(tmp_path):
    (tmp_path / "h.h").write_text("#pragma once\ninline int h() { return 1; }\n")
    (tmp_path / "b.cpp").write_text('#include "h.h"\nint b() { return h(); }\n')
    (tmp_path / "a.cpp").write_text('#include "h.h"\nint a() { return h(); }\n'
                                    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("a", &a); }\n')
    unit = hostunit.build([str(tmp_path / "a.cpp"), str(tmp_path / "b.cpp")], "ns", read=lambda p: open(p).read(),
                          include_dirs=[str(tmp_path)])
    assert unit.code.count("inline int h()") == 1


@pytest.mark.parametrize("block", [
    'm.def("f", &f, py::arg("x") = 1);',
    'm.def("f", [](int x) { return x; });',
    'm.def("f", &f); m.def("f", &g);',
])
def test_a_module_blocks_pybind11_code_is_taken_as_it_is(tmp_path, block):
    unit = _unit(tmp_path, "int f(int x) { return x; }\nint g(int x, int y) { return y; }\n"
                           f"PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n  {block}\n}}\n")
    assert unit.module and block in unit.code


@pytest.mark.parametrize("block", ['py::class_<Foo>(m, "Foo");', 'py::enum_<E>(m, "E");',
                                   'py::register_exception<Err>(m, "Err");'])
def test_types_pybind11_registers_once_per_process_are_refused(tmp_path, block):
    with pytest.raises(hostunit.Unsupported, match="registers a type with pybind11, once per process"):
        _unit(tmp_path, f"int f() {{ return 1; }}\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n  {block}\n}}\n")


@pytest.mark.parametrize("name", ["__TIMESTAMP__", "__BASE_FILE__"])
def test_macros_naming_the_time_or_the_file_are_refused(tmp_path, name):
    with pytest.raises(hostunit.Unsupported, match=name):
        _unit(tmp_path, f"const char* f() {{ return {name}; }}\n"
                        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f); }\n')


def test_refusals_name_a_long_function_readably():
    text = ("Failed to materialize symbols: { (main, { _ZNSt8_Rb_treeIiSt4pairIKiiESt10_Select1stIS2_ESt4lessIiESaIS2_"
            "EE8_M_eraseEPSt13_Rb_tree_nodeIS2_E }) }")
    said = hostjit.refusal(text)
    assert "std::_Rb_tree<...>::_M_erase(" in said and len(said) < 260, said


def test_a_second_module_block_is_refused(tmp_path):
    with pytest.raises(hostunit.Unsupported, match="second PYBIND11_MODULE"):
        _unit(tmp_path, "int f() { return 1; }\nPYBIND11_MODULE(a, m) { m.def(\"f\", &f); }\n"
                        "PYBIND11_MODULE(b, m) { m.def(\"f\", &f); }\n")


def test_a_header_two_sources_read_under_their_own_macros_is_refused(tmp_path):
    # A full build reads scale.h once for each source, each with its own SCALE; one unit would read it once.
    (tmp_path / "scale.h").write_text("#pragma once\n#ifndef SCALE\n#define SCALE 2\n#endif\n"
                                      "static inline double scaled(double v) { return v * SCALE; }\n")
    (tmp_path / "a.cpp").write_text('#define SCALE 20\n#include "scale.h"\n'
                                    "double a(double v) { return scaled(v); }\n")
    (tmp_path / "b.cpp").write_text('#include "scale.h"\ndouble b(double v) { return scaled(v); }\n'
                                    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("b", &b); }\n')
    with pytest.raises(hostunit.Unsupported, match=r"scale\.h, included by a\.cpp and b\.cpp, spells SCALE"):
        hostunit.build([str(tmp_path / "a.cpp"), str(tmp_path / "b.cpp")], "ns", read=lambda p: open(p).read(),
                       include_dirs=[str(tmp_path)])
    # A header's own macro reaching a later source that spells it without including the header.
    (tmp_path / "a.cpp").write_text('#include "scale.h"\ndouble a(double v) { return scaled(v); }\n')
    (tmp_path / "b.cpp").write_text("#ifdef SCALE\nint b() { return 1; }\n#else\nint b() { return 0; }\n"
                                    "#endif\n"
                                    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("b", &b); }\n')
    with pytest.raises(hostunit.Unsupported, match=r"b\.cpp spells SCALE, a macro of a header only a\.cpp includes"):
        hostunit.build([str(tmp_path / "a.cpp"), str(tmp_path / "b.cpp")], "ns", read=lambda p: open(p).read(),
                       include_dirs=[str(tmp_path)])


def test_ndebug_set_by_a_source_reaches_assert_where_the_full_build_reads_it(tmp_path):
    text = ("#define NDEBUG\n#include <torch/extension.h>\n#include <cassert>\n#undef NDEBUG\n#include <vector>\n"
            "int f() { int n = 0; assert((n = 1)); return n; }\n"
            'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f); }\n')
    (tmp_path / "a.cpp").write_text(text)
    asked = []

    def pulls(targets):
        asked.append(targets)
        return 0  # torch/extension.h reads assert.h

    unit = hostunit.build([str(tmp_path / "a.cpp")], "ns", read=lambda p: open(p).read(), pulls_assert=pulls)
    body = unit.code.split("namespace ns {", 1)[1].split("}  // namespace ns")[0]
    assert asked == [["torch/extension.h", "cassert", "vector"]]
    # After the define, where torch/extension.h stood and where <cassert> stood; none where <vector> stood.
    assert body.index("#define NDEBUG") < body.index("#include <assert.h>")
    assert body.count("#include <assert.h>") == 3  # extension.h's, cassert's, and the source's end
    assert body.index("#undef NDEBUG") > body.index("#include <assert.h>")
    with pytest.raises(hostunit.Unsupported, match="sets NDEBUG"):
        hostunit.build([str(tmp_path / "a.cpp")], "ns", read=lambda p: open(p).read())


def test_sources_that_would_meet_in_one_unit_are_refused(tmp_path):
    (tmp_path / "a.cpp").write_text("static double helper(double x) { return x + 100; }\n"
                                    "double from_a(double v) { return helper(v); }\n")
    (tmp_path / "b.cpp").write_text("#define SCALE 3\nstatic long helper(long x) { return x + SCALE; }\n"
                                    "long b(long v) { return helper(v); }\n"
                                    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("b", &b); }\n')
    with pytest.raises(hostunit.Unsupported, match="internal helper"):
        hostunit.build([str(tmp_path / "a.cpp"), str(tmp_path / "b.cpp")], "ns", read=lambda p: open(p).read())
    (tmp_path / "a.cpp").write_text("#define SCALE 2\ndouble from_a(double v) { return v * SCALE; }\n")
    (tmp_path / "b.cpp").write_text('#include <cmath>\n#ifndef M_PI\n#define M_PI 3.14\n#endif\n'
                                    "double pi() { return M_PI; }\n"
                                    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("pi", &pi); }\n')
    code = hostunit.build([str(tmp_path / "a.cpp"), str(tmp_path / "b.cpp")], "ns",
                          read=lambda p: open(p).read()).code
    # a.cpp's SCALE ends with a.cpp; M_PI is pushed and popped around the unit, never #undef'd for good.
    assert code.index('#pragma pop_macro("SCALE")') < code.index("double pi()")
    assert "#undef M_PI" not in code and code.rstrip().endswith("#include <assert.h>")


@pytest.mark.parametrize(("text", "why"), [
    ('#define HDR "val.h"\n#include HDR\nint f() { return 1; }\n', "computed #include"),
    ("__global__ void k(float* p) {}\nvoid go(float* p) {\n"
     "  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);\n  k<<<1, 1>>>(p);\n}\n",
     "named outside a <<<>>> launch"),
])
def test_what_the_interpreter_would_read_otherwise_is_refused(tmp_path, text, why):
    if "PYBIND11_MODULE" not in text:
        text += 'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f); }\n' if "int f()" in text else \
            'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("go", &go); }\n'
    with pytest.raises(hostunit.Unsupported, match=why):
        _unit(tmp_path, text)


OP_LIBRARY = """#include <torch/library.h>
namespace ops {
at::Tensor f_cpu(const at::Tensor& x) { return x; }
TORCH_LIBRARY(ns, m) {
  m.def("f(Tensor x) -> Tensor");
  m.def("g.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)" " ");
}
TORCH_LIBRARY_IMPL(ns, CPU, m) {
  m.impl("f", &f_cpu);
}
}  // namespace ops
"""


def test_an_op_librarys_schemas_are_kept_and_its_impls_deferred(tmp_path):
    unit = _unit(tmp_path, OP_LIBRARY, name="lib.cpp")
    assert not unit.module and unit.impls == 1
    assert unit.schemas == [("ns", "f(Tensor x) -> Tensor"),
                            ("ns", "g.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!) ")]
    assert "TORCH_LIBRARY" not in unit.code.replace("TORCH_LIBRARY_IMPL", "")  # the defs stay the loaded library's
    # The impl block registers only when asked (after the kernels are bound), on its own line numbers.
    assert ('static const int jitload_deferred_0 = ::jitload_rt::defer("ns", c10::DispatchKey::CPU, '
            in unit.code), unit.code
    assert "void jitload_impl_0(torch::Library& m) {\n  m.impl(\"f\", &f_cpu);" in unit.code
    assert re.search(r'#line 8 "[^"]*lib.cpp"\nstatic void jitload_impl_0', unit.code), unit.code


@pytest.mark.parametrize(("block", "why"), [
    ('TORCH_LIBRARY(ns, m) {\n  m.def("f", &f);\n}\n', "only m.def"),
    ('TORCH_LIBRARY_FRAGMENT(ns, m) {\n  m.def("f(Tensor x) -> Tensor");\n}\n', "registered once per process"),
    ('PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n  m.def("f", &f);\n}\n'
     'TORCH_LIBRARY_IMPL(ns, CPU, m) {\n  m.impl("f", &f);\n}\n', "PYBIND11_MODULE and TORCH_LIBRARY"),
])
def test_op_library_blocks_it_cannot_carry_are_refused(tmp_path, block, why):
    with pytest.raises(hostunit.Unsupported, match=why):
        _unit(tmp_path, "#include <torch/library.h>\nat::Tensor f(const at::Tensor& x) { return x; }\n" + block)


def test_device_variables_are_refused(tmp_path):
    with pytest.raises(hostunit.Unsupported, match="device variables"):
        _unit(tmp_path, "__constant__ float table[4];\nint f() { return 1; }\n")


# ---- CPU: a C++ extension through the interpreter, the full build as its oracle ----

SOURCE = textwrap.dedent("""\
    #include <torch/extension.h>
    #include <cfenv>
    #include <string>
    #include <vector>

    torch::Tensor scale(torch::Tensor x, double alpha) {
        TORCH_CHECK(x.dim() == 1, "scale: x must be 1-D, got ", x.dim(), " dimensions");
        return x * alpha + OFFSET;
    }

    int count(torch::Tensor x, int extra) { return static_cast<int>(x.numel()) + extra; }

    std::vector<torch::Tensor> split_sum(const torch::Tensor& x, float weight) {
        auto halves = x.chunk(2);
        return {halves[0] * weight, halves[1].sum()};
    }

    bool asserts_on() {
    #ifdef NDEBUG
        return false;
    #else
        return true;
    #endif
    }

    bool holds_gil() { return PyGILState_Check() == 1; }

    int64_t as_unsigned(unsigned k) { return k; }

    size_t huge() { return (size_t(1) << 63) + 5; }

    // What the compiler and its flags decide: the -O level, the compiler's own macros, rounding, contraction.
    std::vector<int64_t> compiler() {
        int64_t optimize = 0, no_inline = 0, clang = 0;
    #ifdef __OPTIMIZE__
        optimize = 1;
    #endif
    #ifdef __NO_INLINE__
        no_inline = 1;
    #endif
    #ifdef __clang__
        clang = 1;
    #endif
        return {optimize, no_inline, clang, __GNUC__, __GNUC_MINOR__};
    }
    std::string version() { return __VERSION__; }
    double divide_upward(double a, double b) {
        double x = 1.0, y = 3.0;
        std::fesetround(FE_UPWARD);
        double r = x / y + a / b;
        std::fesetround(FE_TONEAREST);
        return r;
    }
    double multiply_add(double a, double b, double c) { return a * b + c; }

    // What pybind11 decides at the boundary.
    int64_t uses(const torch::Tensor& x) { return x.use_count(); }
    std::string device_name(at::Device d) { return d.str(); }
    int64_t words(std::vector<std::string> v) { return static_cast<int64_t>(v.size()); }
    torch::Tensor same(torch::Tensor x) { return x; }
    torch::Tensor fresh(torch::Tensor x) { return x + 0; }

    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
        m.def("scale", &scale, "x * alpha + OFFSET");
        m.def("count", &count, py::arg("x"), py::arg("extra") = 0);
        m.def("split_sum", &split_sum);
        m.def("asserts_on", &asserts_on);
        m.def("holds_gil", &holds_gil);
        m.def("as_unsigned", &as_unsigned);
        m.def("huge", &huge);
        m.def("compiler", &compiler);
        m.def("version", &version);
        m.def("divide_upward", &divide_upward);
        m.def("multiply_add", &multiply_add);
        m.def("uses", &uses);
        m.def("device_name", &device_name);
        m.def("words", &words);
        m.def("same", &same);
        m.def("fresh", &fresh, py::arg("x"), "a new tensor");
    }
    """)


class Sub(torch.Tensor):
    pass


class Seen(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def _raised(call):
    try:
        call()
    except Exception as err:
        return type(err).__name__, str(err).split("\n")[0]
    return None


def _outputs(ext):
    x = torch.linspace(-2, 3, 8, dtype=torch.float64)
    y = torch.arange(6, dtype=torch.float32)
    g = torch.ones(3, requires_grad=True)
    out = ext.scale(g, 3.0)
    out.sum().backward()
    sub = torch.ones(2).as_subclass(Sub)
    mode, one = Seen(), torch.ones(2)
    with mode:
        ext.fresh(one)
    return {"scale": ext.scale(x, 0.5), "count": ext.count(y, 4), "split_sum": ext.split_sum(y, 1.5),
            "grad": g.grad.clone(), "asserts_on": ext.asserts_on(), "holds_gil": ext.holds_gil(),
            "as_unsigned": ext.as_unsigned(7), "huge": ext.huge(), "compiler": ext.compiler(),
            "version": ext.version(), "divide_upward": ext.divide_upward(1.0, 7.0).hex(),
            "multiply_add": ext.multiply_add(0.1, 10.0, -1.0).hex(), "uses": ext.uses(torch.ones(1)),
            "device_str": _raised(lambda: ext.device_name("cpu")), "device": ext.device_name(torch.device("cpu")),
            "words_str": _raised(lambda: ext.words("abc")), "words": ext.words(["a", "b"]),
            "same_type": type(ext.same(sub)).__name__, "fresh_type": type(ext.fresh(sub)).__name__,
            "mode_saw": mode.calls, "doc": ext.fresh.__doc__, "callable": type(ext.fresh).__name__,
            "keyword": ext.fresh(x=torch.ones(1)).tolist(), "bad_keyword": _raised(lambda: ext.fresh(y=1)),
            "bad_int": _raised(lambda: ext.count(y, 2 ** 40)), "default": ext.count(y),
            "by_name": ext.count(x=y, extra=1), "unsigned_neg": _raised(lambda: ext.as_unsigned(-1))}


def _same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        left, right = a[key], b[key]
        if isinstance(left, list | tuple):
            assert len(left) == len(right), key
            for p, q in zip(left, right, strict=True):
                if isinstance(p, torch.Tensor):
                    torch.testing.assert_close(p, q, rtol=0, atol=0)
                else:
                    assert p == q, key
        elif isinstance(left, torch.Tensor):
            torch.testing.assert_close(left, right, rtol=0, atol=0)
        else:
            assert left == right, key


@pytest.fixture(scope="module")
def cpu_ext(tmp_path_factory):
    if importlib.util.find_spec("cppyy") is None:
        pytest.skip("cppyy is not installed (the project's dependencies install it)")
    with pytest.MonkeyPatch.context() as mp:
        # The first load is a full build (the oracle's base), whether or not an earlier test in this process
        # started the interpreter (which would make a first load the interpreter's).
        mp.setenv("JITLOAD_HOST_JIT", "0")
        folder = tmp_path_factory.mktemp("hostjit")
        src = folder / "ops.cpp"
        src.write_text(SOURCE.replace("OFFSET", "1"))
        ext = jitload.load("hostjit_cpu", [str(src)], build_directory=str(folder / "build"))
        assert ext.info.status == "built", ext.info
        mp.setenv("JITLOAD_HOST_JIT", "1")
        hostjit.build_pch()  # as a first build with the host JIT on starts it
        yield ext, src
        ext.stop_verification()


def _jit_edit(ext, src, offset):
    """Save SOURCE with ``offset`` and reload: the interpreter's code must run it."""
    src.write_text(SOURCE.replace("OFFSET", str(offset)))
    ext.reload()
    assert ext.info.status == "jit" and ext.info.verification == "replacing", ext.info


@needs_cppyy
def test_a_host_edit_runs_the_interpreters_code_and_equals_the_full_build(cpu_ext):
    ext, src = cpu_ext
    _jit_edit(ext, src, 2)
    assert "C++ interpreter" in str(ext.info) and "replaces it is running" in str(ext.info)
    jit = _outputs(ext)
    torch.testing.assert_close(jit["scale"], torch.linspace(-2, 3, 8, dtype=torch.float64) * 0.5 + 2)
    assert jit["count"] == 10 and jit["default"] == 6 and jit["by_name"] == 7  # py::arg keywords and defaults
    torch.testing.assert_close(jit["grad"], torch.full((3,), 3.0))  # autograd through the wrapper's own ops
    with pytest.raises(RuntimeError, match="scale: x must be 1-D, got 2 dimensions"):
        ext.scale(torch.ones(2, 2), 1.0)
    assert jit["asserts_on"] and jit["holds_gil"]  # as g++ under torch's flags compiles it, as pybind11 calls it
    assert jit["unsigned_neg"][0] == "TypeError"  # pybind11 refuses -1 for an unsigned; the JIT must not wrap it
    with pytest.raises(TypeError):  # None for a Tensor
        ext.scale(None, 1.0)
    assert jit["huge"] == 2 ** 63 + 5  # pybind11's Python int, not a torch op's int64_t
    # The full build's -O0 and g++'s macros, not the interpreter's -O2 and clang's.
    assert jit["compiler"][:3] == [0, 1, 0] and jit["compiler"][3] >= 5, jit["compiler"]
    assert jit["device_str"][0] == "TypeError" and jit["words_str"][0] == "TypeError"
    assert jit["fresh_type"] == "Tensor" and jit["mode_saw"] == [] and jit["callable"] == "builtin_function_or_method"
    assert jit["doc"].startswith("fresh(x: torch.Tensor) -> torch.Tensor") and "a new tensor" in jit["doc"]
    # A second edit while the interpreter's code runs: the interpreter again, the newest text wins.
    _jit_edit(ext, src, 3)
    jit = _outputs(ext)
    torch.testing.assert_close(jit["scale"], torch.linspace(-2, 3, 8, dtype=torch.float64) * 0.5 + 3)
    assert ext.reload().info.status == "unchanged"  # nothing re-saved: nothing compiled
    # The oracle: the full build of the same text, loaded in place of the interpreter's code.
    ext.wait(timeout=600)
    assert ext.info.status == "built" and ext.info.verification == "the full build now runs", ext.info
    assert ext.module.__file__.endswith(".so")
    _same(jit, _outputs(ext))


@needs_cppyy
def test_what_the_jit_cannot_take_is_built_in_full_and_says_why(cpu_ext):
    ext, src = cpu_ext
    src.write_text(SOURCE.replace("OFFSET", "4").replace("int64_t as_unsigned(unsigned k) { return k; }",
                                                         "int64_t as_unsigned(unsigned k) { return k + __COUNTER__; }"))
    ext.reload()
    assert ext.info.status == "built", ext.info
    assert "host JIT" in ext.info.reason and "__COUNTER__ counts differently" in ext.info.reason
    assert ext.as_unsigned(3) >= 3  # the full build's __COUNTER__ (torch's headers count too)


@needs_cppyy
def test_a_compile_error_takes_the_full_build_and_names_the_file_and_line(cpu_ext):
    ext, src = cpu_ext
    _jit_edit(ext, src, 5)
    before = ext.scale(torch.zeros(1), 1.0)
    broken = SOURCE.replace("OFFSET", "5").replace("return x * alpha + 5;", "return x * alpha + undefined_name;")
    src.write_text(broken.replace("OFFSET", "5"))
    with pytest.raises(BuildError) as info:
        ext.reload()
    assert "ops.cpp:8" in str(info.value), str(info.value)  # the full build's compiler decides, and says where
    torch.testing.assert_close(ext.scale(torch.zeros(1), 1.0), before)  # the running code is kept
    src.write_text(SOURCE.replace("OFFSET", "1"))


@needs_cppyy
def test_what_the_interpreter_rejects_at_run_time_takes_the_full_build(cpu_ext):
    ext, src = cpu_ext
    # Declared, bound, never defined: the interpreter cannot link it (nor could g++'s build: its error names it).
    text = SOURCE.replace("OFFSET", "8").replace("PYBIND11_MODULE", "torch::Tensor missing(torch::Tensor x);\n"
                                                                  "PYBIND11_MODULE")
    src.write_text(text.replace('m.def("huge", &huge);', 'm.def("huge", &huge);\n    m.def("missing", &missing);'))
    with pytest.raises(BuildError):
        ext.reload()  # the full build's verdict: an undefined symbol
    assert ext.info.status == "failed", ext.info
    # One sentence that names the function, not the interpreter's list of mangled symbols.
    refusal = hostjit.refusal("IncrementalExecutor::executeFunction: symbol '_ZN8jl_x_1_27missingEN2at6TensorE' "
                              "unresolved while linking [cling interface function]!\nFailed to materialize symbols: "
                              "{ (main, { _ZN8jl_x_1_27missingEN2at6TensorE, _ZN3foo3barEv }) }")
    assert refusal.startswith("the interpreter cannot link 2 functions the code uses, e.g. missing(at::Tensor)")
    assert "_ZN" not in refusal and "jl_x_1_2" not in refusal
    src.write_text(SOURCE.replace("OFFSET", "1"))


@needs_cppyy
def test_the_interpreters_code_is_opaque_to_torch_compile(cpu_ext):
    ext, src = cpu_ext
    _jit_edit(ext, src, 6)
    compiled = torch.compile(lambda t: ext.scale(t, 2.0) * 3, backend="eager")
    torch.testing.assert_close(compiled(torch.ones(4)), torch.full((4,), 24.0))


FRESH_WORKER = r"""
import sys, time, torch, jitload
t = time.perf_counter()
ext = jitload.load("hostjit_fresh", [sys.argv[1]], build_directory=sys.argv[2])
first = ext.scale(torch.arange(4.0, dtype=torch.float64), 2.0)
print(ext.info.status, ext.info.verification, f"{time.perf_counter() - t:.2f}", flush=True)
ext.wait(timeout=600)
again = ext.scale(torch.arange(4.0, dtype=torch.float64), 2.0)
print(ext.info.status, ext.info.verification, bool(torch.equal(first, again)), first.tolist(), flush=True)
"""


def _wait_for_pch() -> None:
    """The PCH of torch's headers the cpu_ext fixture started (once per machine and torch version)."""
    pch = hostjit.machine_pch()
    deadline = time.monotonic() + 300
    while not os.path.exists(pch) and time.monotonic() < deadline:
        assert not os.path.exists(pch + ".log"), open(pch + ".log").read()[-2000:]
        time.sleep(1)
    assert os.path.exists(pch), "the PCH was not built in 300 s"


@needs_cppyy
def test_a_new_process_gets_a_never_built_source_from_the_interpreter(cpu_ext, tmp_path):
    # The fixture started the PCH of torch's headers (once per machine and torch version).
    _wait_for_pch()
    src = tmp_path / "fresh.cpp"
    src.write_text(SOURCE.replace("OFFSET", "7"))
    done = subprocess.run([sys.executable, "-c", FRESH_WORKER, str(src), str(tmp_path / "build")],
                          capture_output=True, text=True, timeout=900, env={**os.environ, "JITLOAD_HOST_JIT": "1"})
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout + done.stderr[-3000:]
    status, verification, _seconds = lines[0].split()
    assert (status, verification) == ("jit", "replacing"), lines[0]
    # The full build of the same text, loaded in its place, gives the same values.
    assert lines[1].startswith("built the full build now runs True [7.0, 9.0, 11.0, 13.0]"), lines[1]


@needs_cppyy
def test_prepare_makes_the_pch_a_first_load_takes_and_make_runs_it(cpu_ext):
    """`jitload prepare` (make's install step): this machine's PCH, made or waited for (the fixture's build may
    still run), sealed where a load looks for it."""
    done = subprocess.run([sys.executable, "-m", "jitload", "prepare"], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "JITLOAD_HOST_JIT": "1"})
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.strip().endswith(hostjit.machine_pch()), done.stdout
    assert hostjit.usable_pch() == hostjit.machine_pch()
    with open(os.path.join(ROOT, "Makefile")) as f:
        installed = f.read().split("$(VENV)/.installed: pyproject.toml", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/jitload prepare" in installed, installed


WARM_WORKER = r"""
import sys, time, torch, jitload
from jitload.builder import hostjit
src, build = sys.argv[1], sys.argv[2]
ext = jitload.load("hostjit_warm", [src], build_directory=build)
loaded = time.perf_counter()
while not hostjit._session.ready and time.perf_counter() - loaded < 300:
    time.sleep(0.1)  # the user reads the result and edits; the interpreter starts meanwhile
print(ext.info.status, hostjit._session.ready, f"{time.perf_counter() - loaded:.1f}", flush=True)
with open(src) as f:
    text = f.read()
with open(src, "w") as f:
    f.write(text.replace("+ 1.0;", "+ 3.0;"))
t = time.perf_counter()
ext.reload()
out = ext.scale(torch.arange(4.0, dtype=torch.float64), 2.0)
print(ext.info.status, f"{time.perf_counter() - t:.2f}", out.tolist(), flush=True)
ext.stop_verification()
"""


@needs_cppyy
def test_a_fresh_processs_first_host_edit_takes_the_interpreter_started_after_the_first_load(cpu_ext, tmp_path):
    """JITLOAD_HOST_JIT=warm (jitload watch, %load_ext jitload, a Jupyter kernel): the interpreter starts in the
    background after a load from disk, and the process's first host edit runs on it, no restart."""
    _wait_for_pch()
    src, build = tmp_path / "warm.cpp", str(tmp_path / "build")
    src.write_text(SOURCE.replace("OFFSET", "1.0"))
    build_only = "import sys, jitload\njitload.load('hostjit_warm', [sys.argv[1]], build_directory=sys.argv[2])"
    built = subprocess.run([sys.executable, "-c", build_only, str(src), build],
                           capture_output=True, text=True, timeout=900, env={**os.environ, "JITLOAD_HOST_JIT": "0"})
    assert built.returncode == 0, built.stderr[-3000:]
    done = subprocess.run([sys.executable, "-c", WARM_WORKER, str(src), build], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "JITLOAD_HOST_JIT": "warm"})
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout + done.stderr[-3000:]
    assert lines[0].split()[:2] == ["loaded", "True"], lines[0]  # from disk; the interpreter up by itself
    status, _seconds, values = lines[1].split(" ", 2)
    assert status == "jit", lines[1]
    assert values == "[3.0, 5.0, 7.0, 9.0]", lines[1]  # the edit's code: x * 2 + 3


OP_SOURCE = textwrap.dedent("""\
    #include <torch/library.h>
    #include <ATen/ATen.h>

    namespace jl_oplib {
    at::Tensor muladd_cpu(const at::Tensor& a, const at::Tensor& b, double c) {
        TORCH_CHECK(a.sizes() == b.sizes(), "muladd: a and b differ in shape");
        return a * b + c * OFFSET;
    }

    TORCH_LIBRARY(jl_oplib_test, m) {
        m.def("muladd(Tensor a, Tensor b, float c) -> Tensor");
    }

    TORCH_LIBRARY_IMPL(jl_oplib_test, CPU, m) {
        m.impl("muladd", &muladd_cpu);
    }

    at::Tensor muladd_meta(const at::Tensor& a, const at::Tensor& b, double c) { return at::empty_like(a); }

    TORCH_LIBRARY_IMPL(jl_oplib_test, Meta, m) {
        m.impl("muladd", &muladd_meta);
    }
    }  // namespace jl_oplib
    """)
META_BLOCK = """TORCH_LIBRARY_IMPL(jl_oplib_test, Meta, m) {
    m.impl("muladd", &muladd_meta);
}
"""
# A second kernel whose signature does not fit the schema: its registration throws, after the CPU kernel's.
BAD_IMPL = """
namespace jl_oplib {
at::Tensor muladd_bad(const at::Tensor& a) { return a; }
TORCH_LIBRARY_IMPL(jl_oplib_test, CompositeExplicitAutograd, m) {
    m.impl("muladd", &muladd_bad);
}
}  // namespace jl_oplib
"""

@pytest.mark.parametrize(("words", "foreign"), [
    (["-DTORCH_EXTENSION_NAME=x", "-isystem", "/t/include", "-fPIC", "-std=c++20", "-O3", "-Wall"], []),
    (["--expt-relaxed-constexpr", "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC"], []),
    (["-fPIC", "-funsigned-char"], ["-funsigned-char"]),
    (["-include", "cfg.h"], ["-include", "cfg.h"]),
    (["-UNDEBUG"], ["-UNDEBUG"]),
    (["-Xcompiler", "-fPIC,-fno-exceptions"], ["-fno-exceptions"]),
    (["-std=c++20", "-std=c++17"], ["-std= given twice, differently"]),
    # What the interpreter cannot compute alike is refused by name, never admitted by a pattern.
    (["-O2", "-Ofast", "-ffast-math", "-fno-signed-zeros", "-frounding-math"],
     ["-Ofast", "-ffast-math", "-fno-signed-zeros", "-frounding-math"]),
    (["-Wall", "-Wp,-DNDEBUG", "-Wa,--noexecstack", "-march=native", "-g3"], ["-Wp,-DNDEBUG", "-Wa,--noexecstack",
                                                                           "-march=native"]),
])
def test_build_flags_that_may_change_the_host_codes_meaning_are_named(words, foreign):
    assert hostflags._foreign(words) == foreign


def test_the_units_macros_are_the_full_build_compilers(tmp_path):
    (tmp_path / "build.ninja").write_text("cxx = c++\ncflags = -DTORCH_EXTENSION_NAME=x -D_GLIBCXX_USE_CXX11_ABI=1 "
                                          "-D_GLIBCXX_ASSERTIONS -fPIC -std=c++20\n"
                                          "post_cflags = -O3 -O2\n")
    flags = hostflags.build_flags(str(tmp_path), cuda=False)
    assert (flags.opt, flags.std, flags.cxx) == ("2", "-std=c++20", "c++")  # the last -O of the host compile line
    assert flags.foreign == ["-D_GLIBCXX_ASSERTIONS"]  # acts on headers parsed once; torch's own ABI macro does not
    assert hostflags.interpreter_level("s") == 2 and hostflags.interpreter_level("0") == 0
    macros = hostflags.predefined(flags)
    assert "__OPTIMIZE__" in macros.define and "__NO_INLINE__" not in macros.define
    assert "__clang__" in macros.undefine and "__OPTIMIZE__" not in macros.undefine
    assert macros.define["__GNUC__"].startswith("#define __GNUC__ ")
    assert "__PIC__" in macros.define and "__PIE__" in macros.undefine and "linux" in macros.undefine
    unoptimised = hostflags.predefined(hostflags.Flags([], {}, std="-std=c++20"))
    assert "__NO_INLINE__" in unoptimised.define and "__OPTIMIZE__" in unoptimised.undefine


def test_a_pch_is_used_only_whole_and_this_users(tmp_path, monkeypatch):
    pch = tmp_path / "torch-x.pch"
    pch.write_bytes(os.urandom(3 << 20))
    os.chmod(pch, 0o600)
    (tmp_path / "torch-x.pch.seal").write_text(hostjit.seal(str(pch)))
    monkeypatch.setattr(hostjit, "machine_pch", lambda: str(pch))
    assert hostjit.usable_pch() == str(pch)
    with open(pch, "r+b") as f:  # cut short, as by a full disk or a killed copy
        f.truncate(2 << 20)
    assert hostjit.usable_pch() is None
    (tmp_path / "torch-x.pch.seal").write_text(hostjit.seal(str(pch)))
    os.chmod(pch, 0o666)  # others may write it
    assert hostjit.usable_pch() is None
    os.chmod(pch, 0o600)
    os.unlink(tmp_path / "torch-x.pch.seal")  # made by an older jitload, or never finished
    assert hostjit.usable_pch() is None


EXIT_WORKER = r"""
import sys, time
from jitload.builder import hostjit
hostjit.warm(False)
time.sleep(float(sys.argv[1]))
print("last words", file=sys.stderr)
"""


@needs_cppyy
@pytest.mark.parametrize("after", [0.0, 0.5, 2.0])
def test_exiting_while_the_interpreter_starts_is_a_clean_exit(after):
    done = subprocess.run([sys.executable, "-c", EXIT_WORKER, str(after)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "JITLOAD_HOST_JIT": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "last words" in done.stderr


OP_WORKER = r"""
import sys, torch, jitload
ext = jitload.load("hostjit_oplib", [sys.argv[1]], build_directory=sys.argv[2], is_python_module=False)
a, b = torch.linspace(-1, 1, 6, dtype=torch.float64), torch.arange(6, dtype=torch.float64)
print(ext.info.status, torch.ops.jl_oplib_test.muladd(a, b, 0.25).tolist())
"""


@needs_cppyy
def test_an_op_librarys_host_edit_overrides_its_kernel_and_the_next_process_loads_the_full_build(
        tmp_path, monkeypatch):
    monkeypatch.setenv("JITLOAD_HOST_JIT", "1")
    src, build = tmp_path / "oplib.cpp", str(tmp_path / "build")
    src.write_text(OP_SOURCE.replace("OFFSET", "1"))
    ext = jitload.load("hostjit_oplib", [str(src)], build_directory=build, is_python_module=False)
    a, b = torch.linspace(-1, 1, 6, dtype=torch.float64), torch.arange(6, dtype=torch.float64)
    op = torch.ops.jl_oplib_test.muladd
    torch.testing.assert_close(op(a, b, 0.25), a * b + 0.25)
    src.write_text(OP_SOURCE.replace("OFFSET", "3").replace("differ in shape", "must match"))  # a host edit
    ext.reload()
    assert ext.info.status == "jit" and ext.info.verification == "replacing", ext.info
    jit = op(a, b, 0.25)
    torch.testing.assert_close(jit, a * b + 0.75)
    with pytest.raises(RuntimeError, match="muladd: a and b must match"):
        op(a, b[:2], 1.0)
    ext.wait(timeout=600)
    assert "built for the next process" in ext.info.verification, ext.info
    torch.testing.assert_close(op(a, b, 0.25), jit)  # still the interpreter's kernel in this process
    assert ext.reload().info.status == "unchanged"
    # The oracle: a new process loads the full build of the same text, and computes the same values.
    done = subprocess.run([sys.executable, "-c", OP_WORKER, str(src), build], capture_output=True, text=True,
                          timeout=600)
    status, _, values = done.stdout.strip().partition(" ")
    assert status == "loaded", done.stdout + done.stderr[-3000:]
    assert values == str(jit.tolist())
    # An edit that drops a registration would leave it registered here (the full build has none): refused.
    assert META_BLOCK in OP_SOURCE
    src.write_text(OP_SOURCE.replace("OFFSET", "3").replace(META_BLOCK, ""))
    with pytest.raises(BuildError, match="restart Python") as dropped:
        ext.reload()
    assert "drops jl_oplib_test::muladd for Meta" in str(dropped.value), str(dropped.value)
    # An edit whose registrations fail part way registers none of them: the last good kernels run on.
    src.write_text(OP_SOURCE.replace("OFFSET", "5") + BAD_IMPL)
    with pytest.raises(BuildError):
        ext.reload()
    torch.testing.assert_close(op(a, b, 0.25), jit)
    # A schema change cannot be registered again in this process: the full build, for the next one.
    src.write_text(OP_SOURCE.replace("OFFSET", "3").replace("float c) -> Tensor", "float c, float d) -> Tensor"))
    with pytest.raises(BuildError, match="restart Python") as refused:
        ext.reload()
    assert "host JIT: the schema of jl_oplib_test::muladd changed" in str(refused.value), str(refused.value)
    torch.testing.assert_close(op(a, b, 0.25), jit)


# ---- GPU: the layouts people write first ----

def _copy(tmp_path, name):
    shutil.copy(os.path.join(CORPUS, name), tmp_path / name)
    return tmp_path / name


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


def _replays(call, update) -> bool:
    """Whether a CUDA graph captured around ``call()`` computes again on replay after ``update()`` changed its
    inputs in place: a launch on the current stream is captured, one on the legacy default stream runs at once."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        call()  # warm-up outside the capture, on a side stream (as torch asks)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()
    torch.cuda.synchronize()
    update()
    graph.replay()
    torch.cuda.synchronize()
    return torch.allclose(out, call())


GPU_WORKER = r"""
import sys, time, torch, jitload
t = time.perf_counter()
ext = jitload.load(sys.argv[1], [sys.argv[2]], build_directory=sys.argv[3])
a = torch.randn(1000, device="cuda"); b = torch.randn(1000, device="cuda")
ok = torch.allclose(ext.add(a, b), a - b)
print(ext.info.status, ok, f"{time.perf_counter() - t:.3f}")
"""


@needs_cppyy
@pytest.mark.cuda
def test_seed_add_host_kernel_and_signature_edits_then_a_new_process(tmp_path, monkeypatch):
    monkeypatch.setenv("JITLOAD_HOST_JIT", "1")
    src = _copy(tmp_path, "seed_add.cu")
    build = str(tmp_path / "build")
    ext = jitload.load("hostjit_seed", [str(src)], build_directory=build)
    a, b = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    _edit(src, '"Size mismatch between tensors"', '"A and B differ in size"')  # a host edit
    ext.reload()
    assert ext.info.status == "jit" and ext.info.kernels == 1, ext.info
    torch.testing.assert_close(ext.add(a, b), a + b)
    with pytest.raises(RuntimeError, match="A and B differ in size"):
        ext.add(a, b[:10])
    _edit(src, "C[idx] = A[idx] + B[idx];", "C[idx] = A[idx] - B[idx];")  # a kernel edit
    ext.reload()
    assert ext.info.status == "jit"
    torch.testing.assert_close(ext.add(a, b), a - b)
    # A kernel's signature changed together with its launch: a scale argument.
    _edit(src, "float* C, int size)", "float* C, int size, float s)")
    _edit(src, "C[idx] = A[idx] - B[idx];", "C[idx] = s * (A[idx] - B[idx]);")
    _edit(src, "        size\n    );", "        size, 0.5f\n    );")
    ext.reload()
    assert ext.info.status == "jit"
    torch.testing.assert_close(ext.add(a, b), 0.5 * (a - b))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        out = ext.add(a, b)
    side.synchronize()
    torch.testing.assert_close(out, 0.5 * (a - b))
    # The seed launches on the legacy default stream: a CUDA graph does not capture it, here as in a full build.
    jit_replays = _replays(lambda: ext.add(a, b), lambda: b.add_(1.0))
    ext.wait(timeout=600)
    assert ext.info.status == "built" and ext.info.verification == "the full build now runs", ext.info
    torch.testing.assert_close(ext.add(a, b), 0.5 * (a - b))
    assert _replays(lambda: ext.add(a, b), lambda: b.add_(1.0)) == jit_replays
    _edit(src, "C[idx] = s * (A[idx] - B[idx]);", "C[idx] = A[idx] - B[idx];")
    _edit(src, "        size, 0.5f\n    );", "        size, 1.0f\n    );")
    ext.reload()
    ext.wait(timeout=600)
    done = subprocess.run([sys.executable, "-c", GPU_WORKER, "hostjit_seed", str(src), build],
                          capture_output=True, text=True, timeout=600)
    status, ok, _ = done.stdout.split()
    assert (status, ok) == ("loaded", "True"), done.stdout + done.stderr


@needs_cppyy
@pytest.mark.cuda
def test_dispatch_template_host_then_kernel_edit_in_half_precision(tmp_path, monkeypatch):
    monkeypatch.setenv("JITLOAD_HOST_JIT", "1")
    src = _copy(tmp_path, "dispatch_template.cu")
    ext = jitload.load("hostjit_dispatch", [str(src)], build_directory=str(tmp_path / "build"))
    _edit(src, '"x must be contiguous"', '"x: contiguous please"')
    ext.reload()
    assert ext.info.status == "jit" and ext.info.kernels == 4, ext.info
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        x = torch.randn(3000, device="cuda", dtype=dtype)
        torch.testing.assert_close(ext.scale_shift(x, 2.0, 1.0), (x.float() * 2 + 1).to(dtype))
    with pytest.raises(RuntimeError, match="contiguous please"):
        ext.scale_shift(torch.randn(8, 8, device="cuda").t(), 1.0, 0.0)
    _edit(src, "* scale + shift", "* scale - shift")
    ext.reload()
    x = torch.randn(3000, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(ext.scale_shift(x, 2.0, 1.0), (x.float() * 2 - 1).half())
    # It launches on torch's current stream: a CUDA graph captures the interpreter's launch and replays it.
    assert _replays(lambda: ext.scale_shift(x, 2.0, 1.0), lambda: x.add_(1.0))
    ext.wait(timeout=600)
    assert ext.info.verification == "the full build now runs", ext.info
    torch.testing.assert_close(ext.scale_shift(x, 2.0, 1.0), (x.float() * 2 - 1).half())
    assert _replays(lambda: ext.scale_shift(x, 2.0, 1.0), lambda: x.add_(1.0))


@needs_cppyy
@pytest.mark.cuda
def test_load_inline_host_edit(tmp_path, monkeypatch):
    monkeypatch.setenv("JITLOAD_HOST_JIT", "1")
    cuda = textwrap.dedent("""\
        __global__ void twice(const float* x, float* y, int n) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) y[i] = 2 * x[i];
        }
        torch::Tensor run(torch::Tensor x) {
            TORCH_CHECK(x.is_cuda(), "x must be on the GPU");
            auto y = torch::empty_like(x);
            int n = x.numel();
            twice<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
            return y + OFFSET;
        }
        """)
    cpp = "torch::Tensor run(torch::Tensor x);"
    kwargs = dict(build_directory=str(tmp_path / "build"), functions=["run"])
    ext = jitload.load_inline("hostjit_inline", cpp, cuda.replace("OFFSET", "0"), **kwargs)
    ext = jitload.load_inline("hostjit_inline", cpp, cuda.replace("OFFSET", "1"), **kwargs)
    assert ext.info.status == "jit", ext.info
    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(ext.run(x), 2 * x + 1)
    ext.wait(timeout=600)
    torch.testing.assert_close(ext.run(x), 2 * x + 1)


OPLIB_WORKER = r"""
import sys, torch, jitload
ext = jitload.load("hostjit_oplib_gpu", [sys.argv[1]], build_directory=sys.argv[2], is_python_module=False)
a, b = torch.arange(8.0, device="cuda"), torch.full((8,), 2.0, device="cuda")
print(ext.info.status, torch.ops.extension_cpp.mymuladd(a, b, 0.5).tolist())
"""


@needs_cppyy
@pytest.mark.cuda
def test_op_library_host_kernel_and_host_edits_then_a_new_process(tmp_path, monkeypatch):
    monkeypatch.setenv("JITLOAD_HOST_JIT", "1")
    src, build = _copy(tmp_path, "op_library.cu"), str(tmp_path / "build")
    ext = jitload.load("hostjit_oplib_gpu", [str(src)], build_directory=build, is_python_module=False)
    op = torch.ops.extension_cpp.mymuladd
    a, b = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    torch.testing.assert_close(op(a, b, 0.5), a * b + 0.5)
    _edit(src, "TORCH_CHECK(a.sizes() == b.sizes());", 'TORCH_CHECK(a.sizes() == b.sizes(), "a, b: one shape");')
    ext.reload()  # a host edit: the interpreter's kernel is registered over the library's
    assert ext.info.status == "jit" and ext.info.kernels == 1, ext.info
    torch.testing.assert_close(op(a, b, 0.5), a * b + 0.5)
    with pytest.raises(RuntimeError, match="a, b: one shape"):
        op(a, b[:10], 0.5)
    _edit(src, "a[idx] * b[idx] + c", "a[idx] * b[idx] - c")  # a kernel edit while the interpreter's code runs
    ext.reload()
    assert ext.info.status == "jit", ext.info
    torch.testing.assert_close(op(a, b, 0.5), a * b - 0.5)
    _edit(src, '"a, b: one shape"', '"a and b: one shape"')  # and a host edit again
    ext.reload()
    torch.testing.assert_close(op(a, b, 0.5), a * b - 0.5)
    with pytest.raises(RuntimeError, match="a and b: one shape"):
        op(a, b[:10], 0.5)
    ext.wait(timeout=600)
    assert "built for the next process" in ext.info.verification, ext.info
    torch.testing.assert_close(op(a, b, 0.5), a * b - 0.5)
    done = subprocess.run([sys.executable, "-c", OPLIB_WORKER, str(src), build], capture_output=True, text=True,
                          timeout=600)
    status, _, values = done.stdout.strip().partition(" ")
    assert status == "loaded", done.stdout + done.stderr[-3000:]
    x, y = torch.arange(8.0, device="cuda"), torch.full((8,), 2.0, device="cuda")
    assert values == str(op(x, y, 0.5).tolist())  # the full build, in the next process, computes the same
