"""BuildError: compiler logs of gcc and nvcc turned into file:line messages with source context."""

from extensions import write

from jitload.builder.errors import BuildError, parse_diagnostics


def test_gcc_error_with_context(tmp_path):
    src = write(tmp_path / "k.cpp", "int a = 1;\nint b = 2;\nint c = oops;\nint d = 4;\nint e = 5;\nint f = 6;\n")
    log = f"[1/2] c++ -c {src}\nFAILED: k.o\n{src}:3:9: error: 'oops' was not declared in this scope\n"
    (diag,) = parse_diagnostics(log, str(tmp_path))
    assert (diag.file, diag.line) == (src, 3)
    assert diag.message == "'oops' was not declared in this scope"
    assert [n for n, _ in diag.context] == [1, 2, 3, 4, 5]


def test_nvcc_error_relative_path_and_dedup(tmp_path):
    write(tmp_path / "k.cu", "__global__ void k() {\n  x = 1;\n}\n")
    line = 'k.cu(2): error: identifier "x" is undefined\n'
    (diag,) = parse_diagnostics(line * 2, str(tmp_path))  # nvcc repeats host-pass errors
    assert diag.file == str(tmp_path / "k.cu") and diag.line == 2
    assert "  >     2 |   x = 1;" in diag.format()


def test_error_without_position_falls_back_to_log_lines(tmp_path):
    err = BuildError("e", "noise\n/usr/bin/ld: cannot find -lmissing\ncollect2: error: ld returned 1\n", str(tmp_path))
    assert "cannot find -lmissing" in str(err)
    assert not err.diagnostics


def test_at_most_five_errors_shown(tmp_path):
    src = write(tmp_path / "k.cpp", "\n" * 20)
    log = "".join(f"{src}:{i}:1: error: bad {i}\n" for i in range(1, 12))
    err = BuildError("e", log, str(tmp_path))
    assert len(err.diagnostics) == 5 and "bad 6" not in str(err) and "bad 11" in err.log
