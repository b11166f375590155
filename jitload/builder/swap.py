"""Kernel swap: new device code in a loaded extension in about a second, whatever the source's layout.

A full build of a source that includes torch costs 30-60 s, nearly all of it torch's headers. When an edit
changes only the bodies of ``__global__``/``__device__`` functions (or a header that only device code
includes, or adds the ``#include`` of a header of ``__device__`` functions alone), the compiled host code is
still right, and only the kernels need replacing:

1. Every CUDA extension jitload links carries a small shim (``swap_shim.cpp``, linked with
   ``-Wl,--wrap=`` on the CUDA runtime's registration and launch entry points of that library alone). It
   records each kernel's host stub and mangled device name as the library registers them, and sends every
   launch (``<<<>>>``, ``cudaLaunchKernel``, ``cudaLaunchKernelEx``, cooperative launches) and every query
   that takes a kernel (attributes, occupancy) to the newest code for that kernel.
2. On such an edit (:mod:`jitload.builder.swapplan` decides), :mod:`jitload.builder.devicecode` derives a
   torch-free unit from the source (its device code, light c10 headers, the CUDA half/bfloat16 headers, the
   device pass's macros, explicit instantiations of the templated kernels the library registered, those its own
   headers define included, such as kernels/common's), nvcc compiles it to a fatbin with the build's own device
   flags (under a second), and the shim loads it (``cudaLibraryLoadData``) and redirects the kernels, all or none.

Anything the derivation or the swap cannot do with certainty (see devicecode's limits, a kernel missing from
the new code, device variables in it) raises :class:`SwapError`, and the caller does the full build instead;
every swap made is checked against the full build afterwards (:mod:`jitload.builder.background`). Loaded code is
never unloaded, so CUDA graphs captured before a swap replay the kernels they captured.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor

from . import devicecode, imagecmp, trust

SWAP_DIR = "swap"


class SwapError(Exception):
    """Why a kernel swap cannot be done; the caller rebuilds in full instead."""


def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


class Shim:
    """The shim inside one loaded library, reached through that library's own handle."""

    def __init__(self, path: str):
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LOCAL)  # already loaded: no second copy
        except OSError:
            lib = ctypes.CDLL(path)
        try:
            self._count = lib.jitload_swap_kernel_count
            self._name = lib.jitload_swap_kernel_name
            self._load = lib.jitload_swap_load
            self._swaps = lib.jitload_swap_count
        except AttributeError as err:
            raise SwapError(f"{os.path.basename(path)} was built without jitload's kernel-swap shim") from err
        self._name.restype = ctypes.c_char_p
        self._name.argtypes = [ctypes.c_int]
        self._load.restype = ctypes.c_int
        self._load.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_char_p,
                               ctypes.c_size_t]
        self._lib = lib

    def kernels(self) -> list[str]:
        """Mangled names of the library's kernels, in registration order, without repeats."""
        names = (self._name(i) for i in range(self._count()))
        return list(dict.fromkeys(n.decode() for n in names if n))

    def swaps(self) -> int:
        return int(self._swaps())

    def load(self, image: bytes, names: list[str]) -> int:
        """Send the named kernels to their copies in ``image``; all or none. Returns the stubs redirected."""
        array = (ctypes.c_char_p * len(names))(*(n.encode() for n in names))
        error = ctypes.create_string_buffer(1024)
        done = self._load(image, array, len(names), error, len(error))
        if done < 0:
            raise SwapError(error.value.decode(errors="replace"))
        return done


def ninja_variables(build_directory: str) -> dict[str, str]:
    values = {}
    with open(os.path.join(build_directory, "build.ninja")) as f:
        for line in f:
            if " = " in line and not line.startswith((" ", "\t", "build ", "rule ")):
                key, _, value = line.rstrip("\n").partition(" = ")
                values[key.strip()] = value.replace("$ ", " ").replace("$:", ":").replace("$$", "$")
    return values


def device_command(build_directory: str, unit: str, image: str, source: str) -> list[str]:
    """nvcc with the build's own device flags (arch list, defines, includes), compiling ``unit`` to a fatbin."""
    values = ninja_variables(build_directory)
    if "nvcc" not in values:
        raise SwapError("the build has no CUDA compile rule")
    return [*shlex.split(values["nvcc"]), "-fatbin", f"-I{os.path.dirname(source)}",
            *shlex.split(values.get("cuda_cflags", "")), unit, "-o", image,
            *shlex.split(values.get("cuda_post_cflags", ""))]


def kernel_name(mangled: str) -> str | None:
    """A registered kernel's qualified name without template arguments or parameters ('ns::k')."""
    text = devicecode.demangle(mangled)
    if text is None:  # an extern "C" kernel keeps its plain name
        return mangled if mangled.isidentifier() else None
    cut = devicecode.matching_open(text, len(text) - 1) if text.endswith(")") else -1
    before = text[:cut].rstrip() if cut > 0 else text
    if before.endswith(">"):
        start = devicecode.matching_open(before, len(before) - 1)
        before = before[:start] if start >= 0 else before
    return before.rpartition(" ")[2]


def _defined_kernels(text: str) -> set[str]:
    items = devicecode.parse(text)
    return {devicecode.qualified_name(item) for item in items if item.kind == "kernel"}


def plan_unit(source: str, headers: list[str], registered: list[str],
              texts: dict[str, str] | None = None, prelude: str = "") -> tuple[str, list[str]]:
    """The device unit for ``source`` and the registered kernels it must replace (all of its own and its user
    headers' kernels). ``texts`` holds the source's and headers' texts as already read and judged; a file not in
    it is read here; ``prelude`` is the macro state the full build's device pass had after torch's includes
    (:func:`jitload.builder.ppview.device_prelude`). Raises :class:`SwapError` where unsure."""
    texts = texts or {}

    def read(path: str) -> str:
        if path in texts:
            return texts[path]
        with open(path) as f:
            return f.read()

    try:
        text = read(source)
        defined = _defined_kernels(text)
        header_texts = {}
        for header in headers:
            header_text = header_texts[header] = read(header)
            if devicecode.includes_torch(header_text):
                raise SwapError(f"{os.path.basename(header)} includes torch headers")
            devicecode.check_no_device_variables(header_text)
            defined |= _defined_kernels(header_text)
        unit, _ = devicecode.device_unit(text, source, registered, header_texts, prelude=prelude)
    except devicecode.Unsure as err:
        raise SwapError(f"{os.path.basename(source)}: {err}") from err
    except (OSError, UnicodeDecodeError) as err:
        raise SwapError(str(err)) from err
    by_name: dict[str | None, list[str]] = {}
    for n in registered:
        by_name.setdefault(kernel_name(n), []).append(n)
    # Every kernel the unit defines must map to a loaded one, or an edit of it would silently not take effect
    # (an anonymous namespace, an out-of-line ns::k definition, a name the demangler cannot give back).
    missing = sorted(k for k in defined if k not in by_name)
    if missing:
        raise SwapError(f"{', '.join(missing)} in {os.path.basename(source)} cannot be matched to a loaded kernel")
    names = [n for k in sorted(defined) for n in by_name[k]]
    return unit, names


class CompileError(SwapError):
    """The device unit did not compile; ``messages`` are nvcc's error lines, ``first`` the first of them."""

    def __init__(self, text: str, messages: list[str], first: str = ""):
        super().__init__(text)
        self.messages = messages
        self.first = first


def image_kernels(image: bytes, planned: list[str], registered: list[str], built: set[str] = frozenset()
                  ) -> list[str]:
    """The registered kernels a compiled unit replaces: those planned from its text and every other registered
    kernel the image defines (a kernel spelled through a macro is found here, not in the text). Raises
    :class:`SwapError` where the image defines device variables (the host code fills the loaded module's
    copies with ``cudaMemcpyToSymbol``, which new kernels would not read), or lacks a kernel that ``built``,
    the full build's image of the same source, defines (its edit would not take effect)."""
    try:
        kernels, variables = imagecmp.image_symbols(image)
    except RuntimeError as err:
        raise SwapError(str(err)) from err
    if variables:
        raise SwapError(f"device variables ({', '.join(sorted(variables)[:3])}) belong to the loaded module")
    missing = [n for n in planned if n not in kernels] + sorted(n for n in built & set(registered) if n not in kernels)
    if missing:
        raise SwapError(f"the new device code lacks {', '.join(missing[:3])}")
    return list(dict.fromkeys([*planned, *(n for n in registered if n in kernels)]))


def compile_units(build_directory: str, units: dict[str, str]) -> dict[str, bytes]:
    """Compile each source's derived unit (in parallel); returns the fatbin images by source."""
    directory = trust.private_dir(os.path.join(build_directory, SWAP_DIR))

    def one(source: str) -> bytes:
        # Named per process: two notebooks swapping the same extension at once never share a file.
        stem = f"{os.path.splitext(os.path.basename(source))[0]}.{os.getpid()}"
        unit = os.path.join(directory, f"{stem}.device.cu")
        image = os.path.join(directory, f"{stem}.fatbin")
        with open(unit, "w") as f:
            f.write(units[source])
        cmd = device_command(build_directory, unit, image, source)
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        with open(os.path.join(build_directory, "build.log"), "a") as log:
            log.write(f"# kernel swap: {' '.join(cmd)}\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            output = done.stdout + done.stderr
            errors = [ln for ln in output.splitlines() if ": error" in ln or "fatal" in ln]
            first = errors[0] if errors else output.strip()[:300]
            raise CompileError(f"the device code alone did not compile ({first.strip()})", errors, first.strip())
        with open(image, "rb") as f:
            return f.read()

    with ThreadPoolExecutor(max_workers=max(1, min(len(units), os.cpu_count() or 1))) as pool:
        results = dict(zip(units, pool.map(one, units), strict=True))
    return results
