"""The container's entrypoint and its services, run here (no Docker engine) with the image's own config files
on loopback ports: sshd takes the test key and refuses passwords and root; JupyterLab needs the token it
generated and printed; when one service dies the entrypoint exits.

Unprivileged, the services run as the current user, as in the container. As root (CI, whose virtual
environment other users cannot reach) they run as root and the SSH login is a test user's.
"""

import json
import os
import pathlib
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRYPOINT = os.path.join(REPO, "docker", "entrypoint.sh")
TEST_USER = "jitload-ci"  # the SSH login when the tests run as root (root logins are refused)

pytestmark = pytest.mark.skipif(not (shutil.which("sshd") or os.path.exists("/usr/sbin/sshd")),
                                reason="openssh-server is not installed (make test installs it when run as root)")


def _service_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        return pwd.getpwuid(os.getuid())
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        # '*': no valid password, but not a locked account, which sshd refuses even with a key (as the image)
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--password", "*", TEST_USER], check=True)
        return pwd.getpwnam(TEST_USER)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, svc, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and svc.proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on port {port}; the entrypoint said:\n{svc.output()}")


class Services:
    def __init__(self, proc, user, ssh_port, jupyter_port, key, state):
        self.proc, self.user = proc, user
        self.ssh_port, self.jupyter_port, self.key, self.state = ssh_port, jupyter_port, key, state
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()

    def output(self) -> str:
        return "".join(self.lines)

    def token(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if "lab?token=" in line:
                    return line.split("lab?token=")[1].split()[0]
            time.sleep(0.2)
        raise AssertionError(f"no token printed:\n{self.output()}")

    def ssh(self, login: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ssh", "-p", str(self.ssh_port), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", *extra, f"{login}@127.0.0.1", "echo logged-in"],
            capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    user = _service_user()
    # In the login user's home: a root sshd reads authorized_keys as that user, and its StrictModes refuse
    # keys below a world-writable folder such as /tmp.
    base = pathlib.Path(tempfile.mkdtemp(prefix="jitload-services-", dir=user.pw_dir))
    os.chmod(base, 0o755)
    (base / "workspace").mkdir()
    key = str(tmp_path_factory.mktemp("client") / "id_ed25519")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    ssh_port, jupyter_port = _free_port(), _free_port()
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
               JITLOAD_BIND="127.0.0.1", JITLOAD_SSH_PORT=str(ssh_port), JITLOAD_JUPYTER_PORT=str(jupyter_port),
               JITLOAD_STATE_DIR=str(base / "state"), JITLOAD_CONFIG_DIR=os.path.join(REPO, "docker"),
               JITLOAD_WORKSPACE=str(base / "workspace"), SSH_AUTHORIZED_KEYS=open(f"{key}.pub").read().strip())
    env.pop("JUPYTER_TOKEN", None)
    proc = subprocess.Popen([ENTRYPOINT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    svc = Services(proc, user.pw_name, ssh_port, jupyter_port, key, base / "state")
    try:
        _wait_port(ssh_port, svc)
        _wait_port(jupyter_port, svc)
        yield svc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        shutil.rmtree(base, ignore_errors=True)


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
