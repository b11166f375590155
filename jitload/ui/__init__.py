"""The user-interface floor: the command line (:mod:`.cli`), the cell magics (:mod:`.magics`), the notebook
panels (:mod:`.widgets`), rebuild on save in a terminal (:mod:`.watcher`), the file events both wait on
(:mod:`.filewatch`) and the environment report (:mod:`.doctor`).

These only call the floors below (:mod:`jitload.builder`, :mod:`jitload.harness`, :mod:`jitload.kernels`) and
print what they return; only the package's entry points (``jitload/__init__.py``, ``__main__.py``) import
them. tests/test_imports.py checks it.
"""
