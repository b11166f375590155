"""jitload.load / load_inline: hot rebuild after each kind of change, no-op reloads, failures and fixes."""

import json
import os

import pytest
import torch
from extensions import HEADER, KERNEL, PYBIND_BINDING, make_extension, write

import jitload
from jitload.builder import build, manifest
from jitload.builder.extension import PREVIOUS_KEPT


@pytest.fixture(scope="module")
def torch_ext(tmp_path_factory):
    """One extension with a torch-heavy binding, built once (about 20 s on 2 cores) and edited by the tests."""
    folder = tmp_path_factory.mktemp("torch_ext")
    sources = make_extension(folder)
    ext = jitload.load("torch_ext", sources, build_directory=str(folder / "build"))
    return ext, folder, sources


def _mtime(path):
    return os.stat(path).st_mtime_ns


def test_cold_build_loads_module(torch_ext):
    ext, _, _ = torch_ext
    assert ext.value() == 11
    assert torch.equal(ext.shift(torch.zeros(3)), torch.full((3,), 11.0))
    assert ext.info.module_name.startswith("torch_ext_")


def test_noop_reload_runs_no_compiler(torch_ext, monkeypatch):
    ext, _, sources = torch_ext
    ext.reload()  # settle after any earlier test

    def no_ninja(*args, **kwargs):
        raise AssertionError("ninja was started for a no-op reload")

    monkeypatch.setattr(build, "run_ninja", no_ninja)
    again = jitload.load("torch_ext", sources, build_directory=ext.build_directory)
    assert again is ext
    assert ext.info.status == "unchanged" and ext.info.commands == 0


def test_kernel_edit_recompiles_only_the_kernel(torch_ext):
    ext, folder, _ = torch_ext
    binding_obj = os.path.join(ext.build_directory, "binding.o")
    before = _mtime(binding_obj)
    old_module = ext.module
    write(folder / "kernel.cpp", KERNEL.format(base=20))
    ext.reload()
    assert ext.value() == 21
    assert ext.info.status == "built" and ext.info.commands == 2  # kernel.o and the link
    assert _mtime(binding_obj) == before
    assert ext.module is not old_module


def test_header_only_edit_rebuilds(torch_ext):
    ext, folder, sources = torch_ext
    write(folder / "kernel.h", HEADER.format(offset=5))
    jitload.load("torch_ext", sources, build_directory=ext.build_directory)
    assert ext.value() == 25
    assert str(folder / "kernel.h") in ext.files()


def test_failed_build_keeps_old_module_then_fix_rebuilds(torch_ext):
    ext, folder, _ = torch_ext
    good = ext.value()
    write(folder / "kernel.cpp", "#include \"kernel.h\"\nint kernel_value() {\n  return undefined_name;\n}\n")
    with pytest.raises(jitload.BuildError) as caught:
        ext.reload()
    err = caught.value
    assert f"{folder / 'kernel.cpp'}:3:" in str(err)
    assert "undefined_name" in str(err)
    assert ">     3 |   return undefined_name;" in str(err)
    assert "undefined_name" in err.log and err.log_path and os.path.exists(err.log_path)
    assert "<span" in err._repr_html_()
    assert ext.info.status == "failed" and str(ext.info).endswith(f"({PREVIOUS_KEPT})")
    assert ext.value() == good  # the last good module is still the one in use
    with pytest.raises(jitload.BuildError):  # retried, not cached as failed or as fine
        ext.reload()
    write(folder / "kernel.cpp", KERNEL.format(base=30))
    ext.reload()
    assert ext.value() == 35


def test_flag_change_rebuilds(tmp_path):
    # A flag is on every compile line, whatever the binding includes: pybind11 alone keeps the rebuilds short.
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    ext = jitload.load("flag_ext", sources, build_directory=str(tmp_path / "build"))
    assert ext.flag() == 0
    jitload.load("flag_ext", sources, extra_cflags=["-DEXTRA=7"], build_directory=ext.build_directory)
    assert ext.flag() == 7
    assert ext.info.commands == 3  # both objects and the link
    jitload.load("flag_ext", sources, build_directory=ext.build_directory)
    assert ext.flag() == 0


def test_new_process_loads_cached_build_without_compiling(torch_ext, tmp_path):
    import subprocess

    from extensions import PYTHON

    ext, _, sources = torch_ext
    ext.reload()
    script = (f"import jitload; e = jitload.load('torch_ext', {sources!r}, build_directory={ext.build_directory!r});"
              "print(e.info.status, e.info.commands, e.value())")
    out = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["loaded", "0", str(ext.value())]


def test_manifest_records_sources_and_user_headers_only(torch_ext):
    ext, folder, _ = torch_ext
    with open(os.path.join(ext.build_directory, "jitload.json")) as f:
        files = json.load(f)["files"]
    assert sorted(files) == sorted(str(folder / n) for n in ("binding.cpp", "kernel.cpp", "kernel.h"))


def test_load_inline_rebuilds_on_edit(tmp_path):
    header = "#include <pybind11/pybind11.h>\nint answer() { return %d; }\n"
    kwargs = dict(functions=["answer"], with_pytorch_error_handling=False, no_implicit_headers=True,
                  build_directory=str(tmp_path / "inline"))
    ext = jitload.load_inline("inline_ext", header % 1, **kwargs)
    assert ext.answer() == 1
    assert jitload.load_inline("inline_ext", header % 1, **kwargs).info.status == "unchanged"
    jitload.load_inline("inline_ext", header % 2, **kwargs)
    assert ext.answer() == 2


def test_manifest_round_trip_and_unreadable_ones(tmp_path):
    state = manifest.State("key", "tag", {str(tmp_path / "a.cpp"): [1, 2, "d"]}, {"a.cu": None}, {"a.cu": ["a.h"]})
    manifest.write(str(tmp_path), state)
    assert manifest.read(str(tmp_path)) == state and os.listdir(tmp_path) == [manifest.MANIFEST]  # no temp left
    (tmp_path / manifest.MANIFEST).write_text('{"key": "k"}')  # an older or broken file: as if nothing was built
    assert manifest.read(str(tmp_path)) == manifest.State()
    assert manifest.read(str(tmp_path / "nowhere")) == manifest.State()
    assert not manifest.State().up_to_date("")


def test_torch_build_arguments_are_gathered_once(tmp_path):
    src = tmp_path / "x.cpp"
    src.write_text("int x() { return 1; }\n")
    ext = jitload.prepare("gathered", [str(src)], extra_cflags=["-O1"], extra_include_paths=["inc"],
                          build_directory=str(tmp_path / "b"))
    args = ext.spec.torch_args()
    assert args == {"name": "gathered", "sources": [str(src)], "extra_cflags": ["-O1"], "extra_cuda_cflags": [],
                    "extra_ldflags": [], "extra_include_paths": [os.path.abspath("inc")],
                    "build_directory": str(tmp_path / "b"), "with_cuda": False}
    import inspect

    assert set(args) <= set(inspect.signature(build.write_ninja_file).parameters)  # what _rebuild passes it


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.cpp"):
        jitload.load("missing", [str(tmp_path / "nope.cpp")])
    with pytest.raises(ValueError, match="identifier"):
        jitload.load("bad-name", [str(tmp_path / "x.cpp")])
    with pytest.raises(ValueError, match="ASCII"):  # refused up front, not by the linker
        jitload.load("ядро", [str(tmp_path / "x.cpp")])
    with pytest.raises(ValueError, match="at least one"):
        jitload.load("empty", [])


def test_link_error_is_readable(tmp_path):
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    with pytest.raises(jitload.BuildError, match="cannot find -ljitload_no_such_lib"):
        jitload.load("linkerr", sources, extra_ldflags=["-ljitload_no_such_lib"],
                     build_directory=str(tmp_path / "b"))


def test_undefined_symbol_at_import_is_a_build_error(tmp_path):
    src = write(tmp_path / "undef.cpp", """
        #include <pybind11/pybind11.h>
        int declared_only();
        PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &declared_only); }
    """)
    with pytest.raises(jitload.BuildError, match="undefined symbol") as err:
        jitload.load("undef_ext", [src], build_directory=str(tmp_path / "b"))
    assert "declared_only() (_Z13declared_onlyv)" in str(err.value)  # the C++ name, then the symbol
    assert err.value.log_path and os.path.exists(err.value.log_path)
    assert f"full log: {err.value.log_path}" in str(err.value)


def test_cache_dir_honours_torch_extensions_dir_and_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    sources = make_extension(tmp_path / "src", binding=PYBIND_BINDING)
    ext = jitload.load("cached_ext", sources)
    assert ext.value() == 11
    root = tmp_path / "cache" / "jitload"
    (version_dir,) = root.iterdir()
    assert version_dir.name.startswith(f"py3{__import__('sys').version_info.minor}_torch")
    assert ext.build_directory == str(version_dir / "cached_ext")
    assert os.stat(ext.build_directory).st_mode & 0o777 == 0o700
