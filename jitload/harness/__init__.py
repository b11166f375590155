"""The harness floor: what runs a built kernel to judge it.

:mod:`.checker` (``jitload.check``) with its case layouts (:mod:`.layouts`), guard bytes (:mod:`.guards`),
time limits (:mod:`.deadline`) and forked children (:mod:`.isolate`); a kernel's check in a fresh process
(:mod:`.check_process`); timing (:mod:`.benchmark`, ``jitload.bench``); a kernel folder's spec
(:mod:`.spec`); a build's SASS read back (:mod:`.objdump`).

It may import :mod:`jitload.builder`, never :mod:`jitload.ui`; tests/test_imports.py checks it.
"""
