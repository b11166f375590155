"""What the compiler produced, compared: the host code of two builds' objects, and two device images' kernels.

A kernel swap assumes that a full build of the edited source would give the same host code as the loaded
library and, for every swapped kernel, the machine code that the swap loaded. Once the full build has run
(:mod:`jitload.builder.background`), these functions check both from the compiler's own output rather than from the
source's spelling:

- :func:`host_digests`: one digest per object of everything the host links and runs, read with pyelftools:
  every section but ``.nv_fatbin`` (the embedded device image) and the symbol table taken symbol by symbol,
  leaving out what differs between two compiles of the same code (the ``tmpxft_<pid>`` name of nvcc's
  temporary file, the size of the fatbin symbol). Two objects with the same digest make the same host program.
- :func:`kernel_code`: each function's SASS in a device image (``cuobjdump -sass``), addresses and encodings
  left out, so that two images of the same kernel compare equal wherever each was compiled.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from . import toolchain

DEVICE_SECTION = ".nv_fatbin"
_SKIPPED = frozenset({DEVICE_SECTION, ".symtab", ".strtab", ".shstrtab", ".comment"})
_TEMP_NAME = re.compile(r"tmpxft_[0-9a-f]+_[0-9a-f]+[-_]\d+_")


def host_digest(path: str) -> str:
    """A digest of the host side of one object file (see the module docstring)."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        elf = ELFFile(f)
        names = [section.name for section in elf.iter_sections()]
        for section in elf.iter_sections():
            if section.name in _SKIPPED or isinstance(section, SymbolTableSection):
                continue
            data = b"" if section["sh_type"] == "SHT_NOBITS" else section.data()
            digest.update(f"{section.name}\0{section['sh_type']}\0{section['sh_size']}\0".encode() + data)
        for table in elf.iter_sections():
            if not isinstance(table, SymbolTableSection):
                continue
            for symbol in table.iter_symbols():
                index = symbol["st_shndx"]
                where = names[index] if isinstance(index, int) and index < len(names) else str(index)
                if where == DEVICE_SECTION or symbol["st_info"]["type"] == "STT_FILE":
                    continue
                size = symbol["st_size"]
                digest.update(f"{_TEMP_NAME.sub('', symbol.name)}\0{symbol['st_info']['type']}\0"
                              f"{symbol['st_info']['bind']}\0{where}\0{symbol['st_value']}\0{size}\n".encode())
    return digest.hexdigest()


def host_digests(build_directory: str, objects: list[str]) -> dict[str, str]:
    """:func:`host_digest` of each object (paths relative to ``build_directory``), by object."""
    return {obj: host_digest(os.path.join(build_directory, obj)) for obj in objects}


def device_image(path: str) -> bytes:
    """The device image (fatbin) an nvcc object embeds; empty for an object without one."""
    with open(path, "rb") as f:
        section = ELFFile(f).get_section_by_name(DEVICE_SECTION)
        return section.data() if section is not None else b""


def _cuobjdump(image: bytes, what: str) -> str:
    """``cuobjdump WHAT`` of a fatbin held in memory; raises RuntimeError where it cannot read it."""
    with tempfile.NamedTemporaryFile(suffix=".fatbin") as f:
        f.write(image)
        f.flush()
        done = subprocess.run([toolchain.cuobjdump(), what, f.name], capture_output=True, text=True,
                              errors="replace")
    if done.returncode != 0:
        raise RuntimeError(f"cuobjdump could not read a device image: {done.stderr.strip()[:300]}")
    return done.stdout


_FUNCTION = re.compile(r"^\s*Function : (\S+)")
_ADDRESS = re.compile(r"/\*[0-9a-f]{4,}\*/|/\* 0x[0-9a-f]+ \*/")


def kernel_code(image: bytes) -> dict[str, str]:
    """Each function's SASS in a fatbin ``image``, by mangled name and arch ('sm_90 _Z3addPf'); raises
    RuntimeError where cuobjdump cannot read it."""
    code: dict[str, list[str]] = {}
    arch, current = "", None
    for line in _cuobjdump(image, "-sass").splitlines():
        if line.startswith("arch = "):
            arch = line.split("=", 1)[1].strip()
            continue
        match = _FUNCTION.match(line)
        if match:
            current = code.setdefault(f"{arch} {match[1]}", [])
        elif current is not None and line.strip().startswith("/*"):
            current.append(" ".join(_ADDRESS.sub("", line).split()))
    return {name: "\n".join(lines) for name, lines in code.items()}


def differing_functions(swapped: bytes, built: bytes) -> list[str]:
    """The functions of ``built`` (kernels and the device functions they call, in every arch) whose code in
    ``swapped`` is missing or different, as 'arch mangled-name'."""
    mine, theirs = kernel_code(swapped), kernel_code(built)
    return sorted(name for name, code in theirs.items() if mine.get(name) != code)


def image_symbols(image: bytes) -> tuple[set[str], set[str]]:
    """The kernels (entry functions) and the device variables (``__device__``/``__constant__``/``__managed__``
    globals) that a fatbin ``image`` defines, read from each of its ELF symbol tables (``cuobjdump -elf``)."""
    kernels: set[str] = set()
    variables: set[str] = set()
    sections: dict[int, str] = {}
    table = ""
    for line in _cuobjdump(image, "-elf").splitlines():
        fields = line.split()
        if line.startswith(".section"):
            table = fields[1] if len(fields) > 1 else ""
            continue
        if line.startswith("Fatbin elf code") or line.startswith("32bit elf") or line.startswith("64bit elf"):
            sections, table = {}, ""
            continue
        if not table and len(fields) >= 9 and re.fullmatch(r"[0-9a-f]+", fields[0]) and fields[-1].startswith("."):
            sections[int(fields[0], 16)] = fields[-1]  # the section header table: index ... name
        elif table == ".symtab" and len(fields) == 7 and fields[0].startswith("0x"):
            info, other, shndx, name = int(fields[3], 16), int(fields[4], 16), int(fields[5], 16), fields[6]
            where = sections.get(shndx, "")
            if info & 0xF == 2 and other & 0x10:
                kernels.add(name)
            elif (info & 0xF == 1 and not name.startswith((".", "$"))
                  and (where.startswith(".nv.global") or re.match(r"\.nv\.constant[1-9]", where))):
                variables.add(name)
    return kernels, variables
