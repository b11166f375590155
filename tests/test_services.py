"""The container's entrypoint and its services, run here (no Docker engine) with the image's own config files
on loopback ports: sshd takes the test key and refuses passwords and root; JupyterLab needs the token it
generated and printed; when one service dies the entrypoint exits.

How they are started: tests/services.py.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from services import HAVE_SSHD, REPO, started

pytestmark = pytest.mark.skipif(not HAVE_SSHD,
                                reason="openssh-server is not installed: `make system-deps` (as root) installs it")


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    with started(tmp_path_factory.mktemp("client")) as svc:
        yield svc


def _get(svc, path, token=None):
    req = urllib.request.Request(f"http://127.0.0.1:{svc.jupyter_port}{path}")
    if token:
        req.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, ""


def test_entrypoint_prints_how_to_connect(services):
    token = services.token()
    assert len(token) >= 32
    out = services.output()
    assert "JupyterLab  http://localhost:" in out and "ssh -p 2222" in out


def test_jupyter_answers_api_and_requires_the_token(services):
    status, body = _get(services, "/api")
    assert status == 200 and "version" in json.loads(body)  # what the image's HEALTHCHECK asks
    assert _get(services, "/api/status", services.token())[0] == 200
    assert _get(services, "/api/status")[0] == 403
    assert _get(services, "/api/status", "wrong-token")[0] == 403


def test_ssh_accepts_the_key(services):
    out = services.ssh(services.user, "-i", services.key, "-o", "IdentitiesOnly=yes")
    assert out.returncode == 0, out.stderr + services.output()
    assert out.stdout.strip() == "logged-in"


def test_ssh_refuses_passwords(services):
    out = services.ssh(services.user, "-o", "PubkeyAuthentication=no",
                       "-o", "PreferredAuthentications=password,keyboard-interactive")
    assert out.returncode == 255
    assert "Permission denied (publickey)" in out.stderr  # the only method offered


def test_ssh_refuses_root(services):
    out = services.ssh("root", "-i", services.key, "-o", "IdentitiesOnly=yes")
    assert out.returncode == 255 and "Permission denied" in out.stderr


def test_host_key_made_at_start_outside_the_image(services):
    assert (services.state / "ssh_host_ed25519_key").exists()
    assert not any("ssh_host" in name for name in os.listdir(os.path.join(REPO, "docker")))


def test_entrypoint_exits_when_a_service_dies(services):
    children = subprocess.run(["pgrep", "-P", str(services.proc.pid)], capture_output=True, text=True).stdout.split()
    jupyter = [p for p in children if "jupyter" in open(f"/proc/{p}/cmdline").read()]
    assert jupyter, f"no jupyter child among {children}"
    os.kill(int(jupyter[0]), signal.SIGKILL)
    assert services.proc.wait(timeout=30) != 0
    time.sleep(0.5)
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", services.ssh_port)) != 0  # sshd was stopped with it
