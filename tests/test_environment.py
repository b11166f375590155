"""environment.yml names the same runtime packages as pyproject.toml, so the two never drift."""

import os
import re
import tomllib

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_matches_pyproject():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    runtime = {_name(r) for r in project["dependencies"]} | {_name(r) for r in project["optional-dependencies"][
        "jupyter"]}
    with open(os.path.join(REPO, "environment.yml")) as f:
        env = yaml.safe_load(f)
    conda = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    pip = {_name(d) for d in next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
           if not d.startswith("-")}
    named = (conda | pip) - {"python", "pip"}
    assert named == runtime, f"only in environment.yml: {named - runtime}; only in pyproject: {runtime - named}"
    assert "python=3.11" in env["dependencies"]
    assert any(d == "torch==2.8.0" for d in next(d["pip"] for d in env["dependencies"] if isinstance(d, dict)))


def test_torch_version_is_reported():
    # Several torch releases meet this code (jitload.builder.torch_compat.TESTED): say which one ran.
    import torch

    print(f"torch {torch.__version__}")
    assert torch.__version__ >= "2.8"
