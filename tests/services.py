"""The container's entrypoint started here (no Docker engine) with the image's own config files on loopback
ports, for tests/test_services.py and tests/test_browser.py.

Unprivileged, the services run as the current user, as in the container. As root (CI, whose virtual
environment other users cannot reach) they run as root and the SSH login is a test user's.
"""

from __future__ import annotations

import contextlib
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
from collections.abc import Iterator

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENTRYPOINT = os.path.join(REPO, "docker", "entrypoint.sh")
HAVE_SSHD = bool(shutil.which("sshd") or os.path.exists("/usr/sbin/sshd"))
TEST_USER = "jitload-ci"  # the SSH login when the tests run as root (root logins are refused)


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
    def __init__(self, proc, user, ssh_port, jupyter_port, key, state, workspace):
        self.proc, self.user = proc, user
        self.ssh_port, self.jupyter_port, self.key, self.state = ssh_port, jupyter_port, key, state
        self.workspace = workspace
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


@contextlib.contextmanager
def started(tmp_root: pathlib.Path, workspace: str | None = None) -> Iterator[Services]:
    """The entrypoint with the image's config files on free loopback ports, a fresh client key, and
    ``workspace`` (copied) as JupyterLab's root; stopped with its whole process group afterwards."""
    user = _service_user()
    # In the login user's home: a root sshd reads authorized_keys as that user, and its StrictModes refuse
    # keys below a world-writable folder such as /tmp.
    base = pathlib.Path(tempfile.mkdtemp(prefix="jitload-services-", dir=user.pw_dir))
    os.chmod(base, 0o755)
    if workspace:
        shutil.copytree(workspace, base / "workspace")
    else:
        (base / "workspace").mkdir()
    key = str(tmp_root / "id_ed25519")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    ssh_port, jupyter_port = _free_port(), _free_port()
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
               JITLOAD_BIND="127.0.0.1", JITLOAD_SSH_PORT=str(ssh_port), JITLOAD_JUPYTER_PORT=str(jupyter_port),
               JITLOAD_STATE_DIR=str(base / "state"), JITLOAD_CONFIG_DIR=os.path.join(REPO, "docker"),
               JITLOAD_WORKSPACE=str(base / "workspace"), SSH_AUTHORIZED_KEYS=open(f"{key}.pub").read().strip())
    env.pop("JUPYTER_TOKEN", None)
    proc = subprocess.Popen([ENTRYPOINT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    svc = Services(proc, user.pw_name, ssh_port, jupyter_port, key, base / "state", base / "workspace")
    try:
        _wait_port(ssh_port, svc)
        _wait_port(jupyter_port, svc)
        yield svc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        shutil.rmtree(base, ignore_errors=True)
