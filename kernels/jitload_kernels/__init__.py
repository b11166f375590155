"""jitload's kernels built ahead of time (``pip install --no-build-isolation ./kernels``).

Importing this package loads every kernel library that setup.py built (``_<kernel>``, one per kernel folder),
which registers that kernel's ``torch.ops.jitload.*`` ops (CPU, CUDA where built, Meta, and autograd), then
runs the ``register()`` of each kernel's Python side (``<kernel>/autograd.py``, where a folder has one). Saved
``torch.export`` programs and TorchScript modules that use the ops then load in a fresh process.
"""

import importlib
import os
import pkgutil

# Discovered, not listed: a kernel folder added to kernels/ is picked up by setup.py and here alike.
for _module in pkgutil.iter_modules(__path__):
    if _module.name.startswith("_"):  # loading a library registers its ops
        importlib.import_module(f"{__name__}.{_module.name}")
_here = os.path.dirname(os.path.abspath(__file__))
for _side in sorted(os.listdir(_here)):  # a kernel's folder, installed as a namespace package (no __init__.py)
    if os.path.isfile(os.path.join(_here, _side, "autograd.py")):  # after the libraries: it may call them
        importlib.import_module(f"{__name__}.{_side}.autograd").register()
