"""``jitload.json``: what a build directory's last finished build was made from, read and written whole.

It holds the build key (sources, flags, compilers, versions: :meth:`jitload.builder.extension.BuildSpec.key`), the tag
of the library it linked (``NAME_<tag>.so``), the content fingerprint of every source and user header the
compilers reported (:mod:`jitload.builder.fingerprint`), and for the kernel swap each device-capable file's host view
and each ``.cu`` unit's user headers, and a digest of each object's host code (what a kernel swap is
verified against). A process that finds the key and fingerprints unchanged loads the
library without starting a compiler. The file is replaced atomically, so a reader never sees half of one; an
unreadable or older-format file reads as "nothing built".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from . import fingerprint

MANIFEST = "jitload.json"


@dataclass
class State:
    """One build's record (empty: nothing built yet)."""

    key: str = ""
    tag: str = ""
    files: fingerprint.Record = field(default_factory=dict)
    hosts: dict[str, str | None] = field(default_factory=dict)  # device-capable file -> host view (None: unsure)
    units: dict[str, list[str]] = field(default_factory=dict)  # .cu source -> the user headers it includes
    objects: dict[str, str] = field(default_factory=dict)  # object -> digest of its host side (imagecmp)
    kernels: dict[str, list[str]] = field(default_factory=dict)  # .cu source -> the kernels its object defines

    def up_to_date(self, key: str) -> bool:
        """Built, for this key, from files whose content has not changed since."""
        return bool(self.tag) and self.key == key and not fingerprint.changed(self.files)


def read(build_directory: str) -> State:
    """The manifest in ``build_directory``, or an empty State when there is none (or it cannot be read)."""
    try:
        with open(os.path.join(build_directory, MANIFEST)) as f:
            data = json.load(f)
        return State(data["key"], data["tag"], {k: list(v) for k, v in data["files"].items()},
                     dict(data.get("hosts", {})), {k: list(v) for k, v in data.get("units", {}).items()},
                     dict(data.get("objects", {})), {k: list(v) for k, v in data.get("kernels", {}).items()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return State()


def write(build_directory: str, state: State) -> None:
    """Replace the manifest in ``build_directory`` with ``state``."""
    path = os.path.join(build_directory, MANIFEST)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"key": state.key, "tag": state.tag, "files": state.files, "hosts": state.hosts,
                   "units": state.units, "objects": state.objects, "kernels": state.kernels}, f, indent=1)
    os.replace(tmp, path)  # a reader never sees half a manifest
