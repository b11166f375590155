"""`jitload clean` takes extension names only, stays inside the cache root and never follows a symbolic link."""

import os

import pytest

from jitload import cli, toolchain


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "cache"))
    root = toolchain.cache_root()
    os.makedirs(os.path.join(root, "built"))
    return root


@pytest.mark.parametrize("name", ["..", "/", "a/b", "../other", "."])
def test_clean_refuses_paths(cache, tmp_path, name, capsys):
    outside = tmp_path / "precious"
    outside.mkdir()
    assert cli.main(["clean", name if name != "/" else str(outside)]) == 2
    assert "is not an extension name" in capsys.readouterr().err
    assert outside.is_dir() and os.path.isdir(os.path.join(cache, "built"))


def test_clean_never_follows_a_symlinked_name(cache, tmp_path, capsys):
    target = tmp_path / "project"
    target.mkdir()
    (target / "keep.cu").write_text("// mine\n")
    os.symlink(target, os.path.join(cache, "linked"))
    assert cli.main(["clean", "linked"]) == 1
    assert "symbolic link" in capsys.readouterr().out
    assert (target / "keep.cu").exists()


def test_clean_removes_a_build_and_says_so(cache, capsys):
    assert cli.main(["clean", "built", "missing"]) == 0
    out = capsys.readouterr().out
    assert f"removed {os.path.join(cache, 'built')}" in out and "nothing to clean" in out
    assert not os.path.exists(os.path.join(cache, "built"))
