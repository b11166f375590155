"""The host oracle's corpus (benchmarks/host_oracle.py): each program names its sources, how it is loaded, the
placeholders of its base text, its edits (new placeholder values) and the calls to make after each.

A call is a Python expression, or statements that set ``result``, run with ``ext`` (the extension's handle),
``torch``, ``x`` (``torch.linspace(-2, 3, 6, dtype=torch.float64)``) and the oracle's helpers: ``Tagged`` (a
Tensor subclass with a ``__torch_function__``), ``in_mode(fn)`` (``fn()`` under a logging TorchFunctionMode:
its result and the torch functions the mode saw), ``in_thread(fn)`` (``fn()`` in a new thread) and ``bits(f)``
(a float's exact bits, ``float.hex``).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    sources: tuple[str, ...]  # corpus files compiled, in order
    base: dict[str, str]  # placeholder -> its text in the base build
    edits: dict[str, dict[str, str]]  # edit name -> placeholders it changes (each edit follows the one before)
    calls: tuple[tuple[str, str], ...]  # (label, code)
    headers: tuple[str, ...] = ()  # corpus files the sources include
    extra_cflags: tuple[str, ...] = ()
    python_module: bool = True
    families: tuple[str, ...] = ()  # what it covers, for the CI sample's choice


def _calls(**labelled: str) -> tuple[tuple[str, str], ...]:
    return tuple(labelled.items())


BOUNDARY_CALLS = _calls(
    add_int="ext.add_int(2, 3)",
    add_int_overflow="ext.add_int(2**31 - 1, 0)",
    add_int_too_big="ext.add_int(2**40, 1)",
    add_int_float="ext.add_int(1.5, 2)",
    add_int_str="ext.add_int('a', 1)",
    add_int_bool="ext.add_int(True, 1)",
    add_int_keywords="ext.add_int(a=1, b=2)",
    add_int_doc="ext.add_int.__doc__",
    add_int_type="type(ext.add_int)",
    add_int_name="ext.add_int.__name__",
    add_i64="ext.add_i64(2**61)",
    add_unsigned="ext.add_unsigned(2**32 - 2)",
    add_unsigned_negative="ext.add_unsigned(-1)",
    above_int64_max="ext.above_int64_max(1)",
    half_float="bits(ext.half_float(0.1))",
    half_float_huge="ext.half_float(1e40)",
    third_double="bits(ext.third_double(1.0))",
    above="(ext.above(0.5), ext.above(7.0))",
    greet="ext.greet('oracle')",
    greet_unicode="ext.greet('é')",
    greet_bytes="ext.greet(b'raw')",
    words="ext.words(3)",
    sizes_plus="ext.sizes_plus(torch.ones(2, 3))",
    device_of="ext.device_of(torch.ones(1))",
    device_of_meta="ext.device_of(torch.ones(1, device='meta'))",
    maybe_add_none="ext.maybe_add(x, None)",
    maybe_add="ext.maybe_add(x, x)",
    maybe_add_missing="ext.maybe_add(x)",
    maybe_mul_none="ext.maybe_mul(x, None)",
    min_max="ext.min_max(x)",
    pieces="ext.pieces(x, 4)",
    **{f"fail_{i}": f"ext.fail({i})" for i in range(9)},
    shout="ext.shout(3)",
    same_subclass="ext.same(Tagged(torch.ones(2)))",
    scaled_subclass="ext.scaled(Tagged(torch.ones(2)), 2.0)",
    scaled_in_mode="in_mode(lambda: ext.scaled(x, 2.0))",
    scaled_alpha_keyword="ext.scaled(x, alpha=3.0)",
    scaled_default="ext.scaled(x)",
    scaled_bad="ext.scaled('x', 1.0)",
    scaled_grad="""
g = torch.ones(3, requires_grad=True)
out = ext.scaled(g, 3.0)
out.sum().backward()
result = (out, g.grad)
""",
    uses="ext.uses(x)",
    uses_view="""
y = x.view(2, 3)
result = ext.uses(y)
""",
)

FLAGS_CALLS = _calls(
    macros="ext.macros()",
    **{f"divide_rounded_{m}": f"bits(ext.divide_rounded(1.0 + 2**-30, 3.0, {m}))" for m in range(4)},
    divide_rounded_neg="bits(ext.divide_rounded(-2.0, 3.0, 1))",
    mul_add="bits(ext.mul_add(1 + 2**-27, 1 - 2**-27, -1.0))",
    neg_zero="bits(ext.neg_zero(1.0))",
    over_zero="(ext.over_zero(1.0, 0.0), ext.over_zero(-1.0, 0.0), ext.over_zero(0.0, 0.0))",
    over_neg_zero="ext.over_zero(1.0, -0.0)",
    is_nan="(ext.is_nan(float('nan')), ext.is_nan(1.0))",
    log_of="ext.log_of(torch.tensor([-1.0, 0.0, -0.0, 1.0, float('inf'), float('nan')]))",
    copysign_of="ext.copysign_of(torch.tensor([-1.0, 0.0, -0.0, 2.0, float('-nan'), float('nan')]))",
    counter="[ext.counter() for _ in range(3)]",
    per_thread="(ext.per_thread(), ext.per_thread(), in_thread(ext.per_thread), ext.per_thread())",
)

PROGRAMS = [
    Program("boundary", ("boundary.cpp",), {"V": "1", "SCALED_ARGS": ""},
            {"v2": {"V": "2"},
             "keywords": {"V": "3", "SCALED_ARGS": ', py::arg("x"), py::arg("alpha") = 2.0'}},
            BOUNDARY_CALLS,
            families=("int", "int64_t", "unsigned", "uint64_t", "float", "double", "bool", "std::string",
                      "std::vector<std::string>", "std::vector<int64_t>", "at::Device", "optional", "tuple",
                      "vector of tensors", "py::arg", "TORCH_CHECK", "TORCH_CHECK_TYPE", "TORCH_CHECK_VALUE",
                      "TORCH_CHECK_INDEX", "std exceptions", "throw int", "printf", "std::cout", "TORCH_WARN",
                      "Tensor subclass", "TorchFunctionMode", "use_count", "__doc__", "type(fn)", "TypeError")),
    Program("flags_o2", ("flags.cpp",), {"V": "1"}, {"v2": {"V": "2"}, "v3": {"V": "3"}}, FLAGS_CALLS,
            extra_cflags=("-O2",),
            families=("__OPTIMIZE__", "__NO_INLINE__", "__GNUC__", "__clang__", "-O2", "fesetround", "FMA",
                      "NaN/inf/signed zero", "statics", "thread_local")),
    Program("flags_default", ("flags.cpp",), {"V": "1"}, {"v2": {"V": "2"}, "v3": {"V": "3"}}, FLAGS_CALLS,
            families=("__OPTIMIZE__", "__NO_INLINE__", "fesetround", "FMA")),
    Program("ndebug", ("ndebug.cpp",), {"V": "1"}, {"v2": {"V": "2"}},
            _calls(ndebug_defined="ext.ndebug_defined()", checked_passes="ext.checked(5000)",
                   checked_tensor_fails="ext.checked_tensor(torch.ones(2))", checked_fails="ext.checked(1)"),
            families=("NDEBUG",)),
    Program("two_sources", ("two_sources_main.cpp", "two_sources_other.cpp"), {"V": "1", "W": "1"},
            {"main": {"V": "2"}, "other": {"W": "2"}},
            _calls(from_main="ext.from_main()", from_other="ext.from_other()",
                   other_scale="ext.other_scale(torch.ones(2))"),
            headers=("shared_flavour.h",), families=("two sources", "shared header macro")),
    Program("op_library", ("op_library.cpp",), {"V": "1"}, {"v2": {"V": "2"}, "v3": {"V": "3"}},
            _calls(muladd="torch.ops.host_oracle_ops.muladd(x, x, 0.25)",
                   muladd_shapes="torch.ops.host_oracle_ops.muladd(x, x[:2], 0.25)",
                   clamp_to="torch.ops.host_oracle_ops.clamp_to(x, 1)",
                   clamp_to_negative="torch.ops.host_oracle_ops.clamp_to(x, -1)",
                   clamp_to_float="torch.ops.host_oracle_ops.clamp_to(x, 1.5)",
                   muladd_in_mode="in_mode(lambda: torch.ops.host_oracle_ops.muladd(x, x, 1.0))"),
            python_module=False, families=("op library",)),
    Program("keywords", ("keywords.cpp",), {"V": "1"}, {"v2": {"V": "2"}},
            _calls(scaled="ext.scaled(x)", scaled_alpha="ext.scaled(x, alpha=0.5)",
                   scaled_all="ext.scaled(x, 0.5, True)", offset="ext.offset(5)", offset_kw="ext.offset(b=2, a=1)",
                   doc="ext.scaled.__doc__"),
            families=("py::arg",)),
    Program("narrow_types", ("narrow_types.cpp",), {"V": "1"}, {"v2": {"V": "2"}},
            _calls(add_short="ext.add_short(32767)", add_short_too_big="ext.add_short(40000)",
                   add_int8="ext.add_int8(127)", next_char="ext.next_char('a')", next_char_long="ext.next_char('ab')",
                   add_long="ext.add_long(2**62)", size_of="ext.size_of(torch.ones(4))",
                   wrap_unsigned="ext.wrap_unsigned(0)", through_float="bits(ext.through_float(0.1))",
                   wide="bits(ext.wide(1.0))", max_u64="ext.max_u64()"),
            families=("int", "unsigned", "uint64_t", "float", "double")),
    Program("printing", ("printing.cpp",), {"V": "1"}, {"v2": {"V": "2"}},
            _calls(noisy="ext.noisy(torch.ones(3))", noisy_again="ext.noisy(torch.ones(2))",
                   only_stderr="ext.only_stderr(3)"),
            families=("printf", "std::cout", "TORCH_WARN")),
    Program("statics", ("statics.cpp",), {"V": "1"}, {"v2": {"V": "2"}},
            _calls(bump="[ext.bump() for _ in range(3)]", remember="(ext.remember('a'), ext.remember('b'))",
                   thread_calls="(ext.thread_calls(), in_thread(ext.thread_calls), ext.thread_calls())",
                   count_loads="ext.count_loads()", cached_ones="ext.cached_ones(2)"),
            families=("statics", "thread_local")),
    Program("tensor_identity", ("tensor_identity.cpp",), {"V": "1"}, {"v2": {"V": "2"}},
            _calls(first_is_a="""
a, b = torch.ones(2), torch.zeros(2)
result = ext.first(a, b) is a
""",
                   first_subclass="type(ext.first(Tagged(torch.ones(2)), torch.zeros(2)))",
                   view_of="""
base = torch.arange(6.0)
v = ext.view_of(base)
result = (v, v._base is base, v.is_contiguous())
""",
                   add_in_place="""
t = torch.zeros(3)
r = ext.add_in_place(t)
result = (r is t, t)
""",
                   fresh_grad="""
g = torch.ones(2, requires_grad=True)
result = (ext.fresh(g).grad_fn is not None, ext.detached(g).requires_grad)
""",
                   fresh_in_mode="in_mode(lambda: ext.fresh(x))",
                   refs="ext.refs(x)", refs_by_value="ext.refs_by_value(x)",
                   describe="ext.describe(x[::2])", fresh_doc="ext.fresh.__doc__"),
            families=("Tensor subclass", "use_count", "TorchFunctionMode", "__doc__")),
    Program("errors_more", ("errors_more.cpp",), {"V": "1"}, {"v2": {"V": "2"}},
            _calls(**{f"raise_{i}": f"ext.raise_from_helper({i})" for i in range(8)},
                   checked_shape="ext.checked_shape(torch.ones(2, 2))",
                   checked_shape_bad="ext.checked_shape(torch.ones(2))"),
            families=("TORCH_CHECK", "std exceptions")),
    Program("single_float", ("single_float.cpp",), {"V": "1"}, {"v2": {"V": "2"}},
            _calls(mul_add_float="bits(ext.mul_add_float(1 + 2**-12, 1 - 2**-12, -1.0))",
                   sum_series="bits(ext.sum_series(1000))", root_negative="ext.root(-1.0)",
                   root="bits(ext.root(2.0))", dot3="bits(ext.dot3(1 + 2**-27, 1.0, 1.0, 1 - 2**-27, -0.5, -0.5))"),
            families=("FMA", "float")),
]
