"""The builder floor: a handle per build directory and everything that puts new code into it.

(Named ``builder``, not ``build``: ``.gitignore``, ruff and setuptools all treat a folder named ``build`` as
build output and skip it.)

The handle (:mod:`.extension`) sequences the mechanisms, each in its own module and each returning a typed
result: what changed (:mod:`.manifest`, :mod:`.fingerprint`), the swap decision (:mod:`.swapplan`) and the swap
(:mod:`.swap`, :mod:`.devicecode`, :mod:`.ppview`, the shim of :mod:`.shim`), the host JIT (:mod:`.hostjit`,
:mod:`.hostunit`), the full build (:mod:`.fullbuild`, :mod:`.build`, :mod:`.build_watchdog`) and its
background run (:mod:`.background`, :mod:`.imagecmp`), the cache's safety (:mod:`.lock`, :mod:`.trust`) and
the toolchain (:mod:`.toolchain`, :mod:`.compiler_probe`, :mod:`.torch_select`, :mod:`.torch_compat`).

Nothing here imports the floors above (:mod:`jitload.harness`, :mod:`jitload.kernels`, :mod:`jitload.ui`);
tests/test_imports.py checks it.
"""
