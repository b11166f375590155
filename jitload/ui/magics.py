"""IPython magics (``%load_ext jitload``): ``%%cuda``, ``%%cpp`` and ``%%kernel`` cells with the hot rebuild.

``%%cuda NAME --functions f,g`` builds the cell as CUDA source through :func:`jitload.load_inline` and binds
``NAME`` in the notebook to the handle; running the cell again after an edit rebuilds only what changed. The
C++ side (declarations and the pybind11 module) is generated from the cell's definitions of the listed
functions, unless ``--cpp VAR`` names a notebook variable holding it. ``%%cpp`` does the same for C++.
``%%kernel PATH`` saves the cell to a file under ``kernels/`` (it says so, and keeps the old file as
``PATH.bak``), then rebuilds the kernel that file belongs to.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shlex
import shutil

from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.display import HTML, display

from ..builder.errors import BuildError
from ..builder.extension import Extension, load_inline


def declarations(source: str, functions: list[str]) -> str:
    """C++ prototypes of ``functions`` from their definitions in ``source`` (for the pybind11 side)."""
    found = []
    for name in functions:
        match = re.search(rf"(?m)^[ \t]*((?:[\w:<>,]+[\s*&]+)+?){re.escape(name)}\s*\(([^)]*)\)\s*\{{", source)
        if not match:
            raise ValueError(f"cannot find a definition of {name}(...) in the cell; pass its declaration with "
                             "--cpp VAR (a variable holding C++ declarations)")
        found.append(f"{match.group(1).strip()} {name}({' '.join(match.group(2).split())});")
    return "\n".join(found)


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"%%{prog}", add_help=False, exit_on_error=False)
    parser.add_argument("name")
    parser.add_argument("--functions", required=True, help="comma-separated functions to expose")
    parser.add_argument("--flags", default="", help="extra compiler flags, quoted")
    parser.add_argument("--cpp", help="a notebook variable holding the C++ declarations")
    parser.add_argument("--verbose", action="store_true")
    return parser


def status_line(ext: Extension) -> str:
    return f"{ext.name}: {ext.info}"


def _show_failure(err: BuildError, ext: Extension | None) -> None:
    """The compiler's errors, then what the handle holds now (``build failed ... (previous build kept)``)."""
    status = f"<p>{html.escape(f'{ext.name}: build {ext.info}')}</p>" if ext is not None and ext.info else ""
    display(HTML(err._repr_html_() + status))


@magics_class
class JitloadMagics(Magics):
    """The cell magics; registered by ``%load_ext jitload``."""

    def _args(self, prog: str, line: str) -> argparse.Namespace:
        try:
            return _parser(prog).parse_args(shlex.split(line))
        except (argparse.ArgumentError, SystemExit) as err:
            raise ValueError(f"%%{prog} NAME --functions f,g [--flags '...'] [--cpp VAR]: {err}") from None

    def _build(self, prog: str, line: str, cell: str, cuda: bool) -> Extension | None:
        args = self._args(prog, line)
        functions = [f.strip() for f in args.functions.split(",") if f.strip()]
        flags = shlex.split(args.flags)
        if args.cpp:
            if args.cpp not in self.shell.user_ns:
                raise NameError(f"--cpp {args.cpp}: no such variable in the notebook")
            cpp = str(self.shell.user_ns[args.cpp])
        else:  # a C++ cell defines its functions itself; a CUDA cell's need declarations on the C++ side
            cpp = declarations(cell, functions) if cuda else ""
        previous = self.shell.user_ns.get(args.name)
        previous = previous if isinstance(previous, Extension) else None
        try:
            if cuda:
                ext = load_inline(args.name, cpp, cuda_sources=cell, functions=functions, extra_cflags=flags,
                                  extra_cuda_cflags=flags, verbose=args.verbose)
            else:
                ext = load_inline(args.name, [cpp, cell] if cpp else [cell], functions=functions,
                                  extra_cflags=flags, verbose=args.verbose)
        except BuildError as err:
            _show_failure(err, previous)
            return None
        self.shell.user_ns[args.name] = ext
        print(status_line(ext))
        return None  # the handle is bound by name; returning it would print its repr a second time

    @cell_magic
    def cuda(self, line: str, cell: str) -> None:
        """%%cuda NAME --functions f,g [--flags '-O3 ...'] [--cpp VAR]: build the cell as CUDA source."""
        self._build("cuda", line, cell, cuda=True)

    @cell_magic
    def cpp(self, line: str, cell: str) -> None:
        """%%cpp NAME --functions f,g [--flags '-O3 ...'] [--cpp VAR]: build the cell as C++ source."""
        self._build("cpp", line, cell, cuda=False)

    @cell_magic
    def kernel(self, line: str, cell: str) -> None:
        """%%kernel PATH: save the cell to PATH under kernels/ (the old file kept as PATH.bak), then rebuild
        the kernel that uses it and bind it by the kernel's name."""
        from .. import kernels

        words = shlex.split(line)
        if len(words) != 1:
            raise ValueError("%%kernel PATH: one path, to a file inside a kernel folder under kernels/")
        root = kernels.default_kernels_dir()
        path = os.path.abspath(words[0] if os.path.isabs(words[0]) or words[0].startswith(("kernels", "."))
                               else os.path.join(root, words[0]))
        folder = os.path.dirname(path)
        if os.path.dirname(folder) != root or not os.path.isfile(os.path.join(folder, "spec.py")):
            raise ValueError(f"{path} is not in a kernel folder under {root} (a folder with a spec.py)")
        text = cell if cell.endswith("\n") else cell + "\n"
        if os.path.exists(path):
            with open(path) as f:
                if f.read() == text:
                    print(f"{os.path.relpath(path)} unchanged")
                else:
                    shutil.copy2(path, path + ".bak")
                    print(f"wrote {os.path.relpath(path)} (the previous version is in {os.path.basename(path)}.bak)")
                    with open(path, "w") as out:
                        out.write(text)
        else:
            with open(path, "w") as out:
                out.write(text)
            print(f"wrote {os.path.relpath(path)} (a new file)")
        kernel = kernels.get(folder)
        ext = kernel.extension()
        try:
            ext.reload()
        except BuildError as err:
            _show_failure(err, ext)
            return
        self.shell.user_ns[kernel.name] = ext
        print(status_line(ext))
