"""jitload/settings.py is the one module that reads the environment, and docs/settings.md its table."""

import ast
import io
import os
import sys

import pytest

from jitload import settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "jitload")
# Run by path from the Makefile before jitload's virtual environment exists: it cannot import jitload.
SCRIPTS = {os.path.join("builder", "torch_select.py")}


def _reads(path: str) -> list[str]:
    """Each ``os.environ.get(...)``, ``os.environ[...]`` read and ``os.getenv(...)`` in the code of ``path``
    (strings such as a child's script are not read)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = ast.unparse(node.func)
            if target in ("os.environ.get", "os.getenv"):
                found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}: {ast.unparse(node)}")
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
              and ast.unparse(node.value) == "os.environ"):
            found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_read_finder_finds_each_form(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('import os\na = os.environ.get("A")\nb = os.environ["B"]\nos.environ["C"] = "1"\n'
                    'd = os.getenv("D")\ne = "os.environ.get(\'E\')"\n')
    assert [r.split(": ", 1)[1] for r in _reads(str(path))] == [
        "os.environ.get('A')", "os.environ['B']", "os.getenv('D')"]


def test_only_settings_reads_the_environment():
    found = []
    for folder, _dirs, files in os.walk(PACKAGE):
        for name in files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, PACKAGE)
            if name.endswith(".py") and rel != "settings.py" and rel not in SCRIPTS:
                found += _reads(path)
    assert not found, "read the environment through jitload.settings: " + "; ".join(found)


def test_a_setting_is_read_at_each_call(monkeypatch):
    monkeypatch.setenv("MAX_JOBS", "3")
    assert settings.max_jobs() == 3
    monkeypatch.setenv("MAX_JOBS", "many")
    assert settings.max_jobs() is None
    monkeypatch.setenv("JITLOAD_CCACHE", " Off ")
    assert settings.switch("JITLOAD_CCACHE") in settings.OFF
    monkeypatch.delenv("JITLOAD_CCACHE")
    assert settings.switch("JITLOAD_CCACHE") == ""


def test_an_undeclared_variable_is_refused():
    with pytest.raises(KeyError, match="HOME"):
        settings.get("HOME")


def test_docs_settings_md_has_the_table():
    with open(os.path.join(ROOT, "docs", "settings.md")) as f:
        rows = [line for line in f if line.startswith("| `")]
    assert rows == [f"| `{v.name}` | {v.default} | {v.meaning} |\n" for v in settings.VARIABLES]


def test_the_logger_writes_plain_lines_to_the_current_stderr_once(monkeypatch):
    log = settings.logger()
    assert settings.logger() is log and not log.propagate
    assert [type(h) for h in log.handlers].count(settings._Stderr) == 1
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    log.info("jitload: building x [1/2] x.o")
    assert sys.stderr.getvalue() == "jitload: building x [1/2] x.o\n"


def test_in_a_jupyter_kernel_progress_goes_to_stdout_and_warnings_to_stderr(monkeypatch):
    class OutStream(io.StringIO):  # ipykernel.iostream.OutStream, as far as the handler looks
        pass

    OutStream.__module__ = "ipykernel.iostream"
    log = settings.logger()
    monkeypatch.setattr(sys, "stdout", OutStream())
    monkeypatch.setattr(sys, "stderr", OutStream())
    log.info("jitload: building x [1/2] x.o")
    log.warning("jitload: the build failed")
    assert sys.stdout.getvalue() == "jitload: building x [1/2] x.o\n"
    assert sys.stderr.getvalue() == "jitload: the build failed\n"
