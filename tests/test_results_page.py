"""benchmarks/results_page.py: one page a machine, one stamped section a benchmark, replaced in place."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def results_page():
    spec = importlib.util.spec_from_file_location("results_page", os.path.join(ROOT, "benchmarks", "results_page.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("gpu", "cores", "page"), [
    ("NVIDIA H100 80GB HBM3", None, "h100.md"), ("NVIDIA H200", None, "h200.md"),
    ("NVIDIA GeForce RTX 4090", None, "geforce-rtx-4090.md"), (None, 2, "cpu-2core.md")])
def test_a_machine_names_its_page(results_page, gpu, cores, page):
    assert results_page.page_name(gpu, cores) == page


def test_a_section_is_replaced_between_its_markers_and_the_others_kept(results_page):
    page = results_page.replace_section("# Results\n", "a", "## A\n\nold a\n")
    page = results_page.replace_section(page, "b", "## B\n\nb\n")
    page = results_page.replace_section(page, "a", "## A\n\nnew a\n")
    assert "old a" not in page and page.index("new a") < page.index("\nb\n")
    assert page.count("<!-- results: a -->") == 1 and page.startswith("# Results\n")


def test_write_section_stamps_command_date_commit_and_machine(results_page, tmp_path):
    path = str(tmp_path / "cpu-2core.md")
    results_page.write_section("bench-add", "add", "| a | b |\n| --- | --- |", command="jitload bench add",
                               path=path, gpu="")
    results_page.write_section("bench-add", "add", "| a | c |\n| --- | --- |", command="jitload bench add",
                               path=path, gpu="")
    text = open(path).read()
    assert text.startswith("# Results on a ") and text.count("## add") == 1 and "| a | c |" in text
    assert "- command: `jitload bench add`" in text and "- date: " in text and ", commit " in text
    assert "CPU cores; torch " in text


def test_a_tool_report_becomes_a_section_with_its_images_beside_the_page(results_page, tmp_path, monkeypatch):
    monkeypatch.setattr(results_page, "RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(results_page, "gpu_name", lambda: None)
    os.makedirs(tmp_path / "results")
    report = tmp_path / "report"
    report.mkdir()
    (report / "add.png").write_bytes(b"png")
    (report / "report.md").write_text("# jitload bench report, 2000-01-01\n\n- device: CPU\n- torch 1.2\n"
                                      "- command: `jitload bench add`\n\n## add\n\n![add](add.png)\n")
    assert results_page.main(["bench-add", "jitload bench add", str(report / "report.md"), "--title", "add"]) == 0
    stem = results_page.page_name(None).removesuffix(".md")
    text = (tmp_path / "results" / f"{stem}.md").read_text()
    assert "## add\n" in text and "### add" in text and f"![add]({stem}/add.png)" in text
    assert "2000-01-01" not in text and "- device: CPU" not in text and "torch 1.2" not in text
    assert (tmp_path / "results" / stem / "add.png").read_bytes() == b"png"
