"""What the compiler probe found for each C++ compiler, recorded by the compiler's identity.

A machine image's default ``CXX`` can be a wrapped gcc whose extensions compute correctly and then crash the
whole process (SIGSEGV) the first time a ``TORCH_CHECK`` message formats an integer
(``std::ostream::operator<<(long)`` inside the library). ``jitload doctor`` probes the compiler
(:func:`jitload.ui.doctor.probe_compiler`) and records the outcome here, under the cache root, keyed by the
compiler's path, size, mtime and version, so each toolchain is probed once; a build with a compiler recorded
as crashing says so before it starts (:func:`known_crash`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass

from . import toolchain, trust


@dataclass(frozen=True)
class Outcome:
    compiler: str
    ok: bool
    detail: str


def identity(cxx: str) -> str | None:
    path = shutil.which(cxx.split()[0]) if cxx else None
    if not path:
        return None
    st = os.stat(path)
    try:
        version = subprocess.run([*cxx.split(), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    parts = [cxx, os.path.realpath(path), str(st.st_size), str(st.st_mtime_ns), version]
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=8).hexdigest()


def _record_path(cxx: str) -> str | None:
    ident = identity(cxx)
    if ident is None:
        return None
    return os.path.join(toolchain.cache_root(), "_compiler_probe", f"{ident}.json")


def known_crash(cxx: str | None = None) -> Outcome | None:
    """The recorded crash of ``cxx`` (default: $CXX), if a probe found one; never probes by itself."""
    outcome = recorded(cxx or toolchain.host_compiler())
    return outcome if outcome is not None and not outcome.ok else None


def recorded(cxx: str) -> Outcome | None:
    """The recorded outcome for this exact compiler, or None when it was never probed."""
    record = _record_path(cxx)
    try:
        with open(record or "") as f:
            data = json.load(f)
        return Outcome(cxx, bool(data["ok"]), data["detail"])
    except (OSError, ValueError, KeyError):
        return None


def record(outcome: Outcome) -> None:
    path = _record_path(outcome.compiler)
    if path is None:
        return
    trust.private_dir(os.path.dirname(path))
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"compiler": outcome.compiler, "ok": outcome.ok, "detail": outcome.detail}, f)
    os.replace(tmp, path)
