"""jitload's modules import each other in floors (:data:`FLOORS`): no circle and no import up a floor, not even
through an import inside a function.

Every ``import`` statement of every module under jitload/ is read with ``ast`` (module level, in functions,
under ``if TYPE_CHECKING``), so a lower module that reaches up into a higher one inside a function is found
although Python would run it without complaint.
"""

import ast
import os

import pytest

PACKAGE = "jitload"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PACKAGE)


def _modules(root: str = ROOT, package: str = PACKAGE) -> dict[str, str]:
    """Module name -> file, for every .py file of the package (subpackages too)."""
    found = {}
    for folder, _dirs, files in os.walk(root):
        rel = os.path.relpath(folder, os.path.dirname(root)).replace(os.sep, ".")
        for f in files:
            if f.endswith(".py"):
                name = rel if f == "__init__.py" else f"{rel}.{f[:-3]}"
                found[name] = os.path.join(folder, f)
    return found


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names (relative imports resolved against ``module``)."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: str, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path.endswith("__init__.py"), node)
            # `from . import kernels` imports the submodule jitload.kernels, not the package's __init__ alone
            subs = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known]
            targets = subs or [target]
        else:
            continue
        for target in targets:
            while target and target not in known:  # `import jitload.kernels.x` names a module or its parents
                target = target.rpartition(".")[0]
            if target and target != module:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def find_circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None (a depth-first search that stops at a back edge)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_walker_finds_a_circle_through_a_function_level_import(tmp_path):
    # The check itself can fail: a planted circle closed inside a function is found and named.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from .high import g\n    return g\n")
    (pkg / "high.py").write_text("from . import low\n")
    modules = _modules(str(pkg), "pkg")
    edges = {name: imports_of(name, path, set(modules)) for name, path in modules.items()}
    assert find_circle(edges) == ["pkg.high", "pkg.low", "pkg.high"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def test_the_walker_sees_the_package_modules():
    edges = graph()
    assert {"jitload", "jitload.builder.extension", "jitload.harness.benchmark", "jitload.ui.widgets"} <= set(edges)
    assert "jitload.harness.benchmark" in edges["jitload"]  # from .harness.benchmark import ...
    assert "jitload.builder.extension" in edges["jitload.kernels"]


def test_no_import_circle_in_jitload():
    circle = find_circle(graph())
    assert circle is None, "import circle: " + " -> ".join(circle)


# The floors, lowest first. A module may import modules of its own floor and of the floors below it, never of
# one above: the build knows nothing of checking or of user interfaces, the harness runs what the build made,
# jitload.kernels ties a kernel folder's build to its check and bench, and the user interfaces only call them.
# The package itself (jitload/__init__.py, __main__.py) is the top: the public names and the entry points.
FLOORS = ("jitload.settings", "jitload.builder", "jitload.harness", "jitload.kernels", "jitload.ui", "jitload")


def floor_of(module: str) -> int:
    """The index in :data:`FLOORS` of the floor ``module`` is on (a subpackage's modules are on its floor)."""
    if module in (PACKAGE, f"{PACKAGE}.__main__"):
        return len(FLOORS) - 1
    for index, floor in enumerate(FLOORS[:-1]):
        if module == floor or module.startswith(floor + "."):
            return index
    raise LookupError(f"{module} is on no floor: put it in a subpackage of jitload or name its floor in FLOORS")


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher floor than the importer's, as 'importer -> imported'."""
    return sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets if floor_of(b) > floor_of(a))


def test_the_floor_check_finds_an_upward_import():
    assert upward_imports({"jitload.builder.swap": {"jitload.harness.checker"}}) == [
        "jitload.builder.swap -> jitload.harness.checker"]
    assert upward_imports({"jitload.ui.cli": {"jitload.harness.checker", "jitload.kernels"}}) == []
    with pytest.raises(LookupError):
        floor_of("jitload.nowhere")


def test_every_module_is_on_a_floor():
    for module in graph():
        floor_of(module)


def test_imports_point_down_the_floors():
    up = upward_imports(graph())
    assert not up, "imports that reach up a floor: " + ", ".join(up)
