import os
import platform

import pytest
import torch

from jitload import kernels
from jitload.builder import toolchain


def pytest_report_header(config):
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return [f"torch {torch.__version__} (CUDA {torch.version.cuda}), Python {platform.python_version()}, GPU: {gpu}"]


# Files whose tests are independent of each other (no module fixture, no shared edits): each test is its own
# unit of work for the workers, so that the longest of them (a notebook: minutes on 2 cores) run side by side.
INDEPENDENT_FILES = {"test_notebooks.py"}


@pytest.hookimpl(optionalhook=True)  # a plain pytest run, without xdist, still loads this file
def pytest_xdist_make_scheduler(config, log):
    """make test's ``--dist loadfile``, with the tests of INDEPENDENT_FILES spread one by one.

    Every other file is one unit of work: its tests share its module fixtures' builds and run in order
    (test_extension's edits build on each other). A scheduler of our own, through xdist's hook, because
    ``--dist loadgroup`` reads xdist_group marks by rewriting node ids, which pytest 9.2 no longer allows."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return nodeid if os.path.basename(file) in INDEPENDENT_FILES else file

    return FileScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    # The slow tests go first (make test keeps this order: --no-loadscope-reorder), so that the longest units
    # start early and the short ones fill in around them.
    slow_files = {item.path for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: item.path not in slow_files)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Builds made by tests never land in the user's build cache: one scratch cache for the whole run, shared
    by pytest-xdist's workers (whose temp folders sit side by side in the run's own), so that a kernel is built
    once per run and a worker that needs it while another builds it waits on jitload's lock, then loads it.
    JITLOAD_TEST_EXTENSIONS_DIR names a scratch cache to reuse instead (the GPU run prebuilds into one).

    Compiles go through the user's ccache folder (JITLOAD_CCACHE_DIR where set): objects compiled by an earlier
    run, or by the user's own builds, are copied, not compiled again. CI points JITLOAD_CCACHE_DIR at a fresh
    folder, so that its timing is a cold one."""
    run_root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_root = run_root.parent
    ccache = os.environ.get("JITLOAD_CCACHE_DIR") or os.path.join(toolchain.cache_base(), "jitload", "ccache")
    with pytest.MonkeyPatch.context() as mp:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            # The workers already fill the cores (one a core); torch's intra-op threads on top of them, in this
            # process and in the notebooks' and CLI's, only contend with the other worker and the compilers:
            # add_relu's CPU check costs 27 CPU-seconds with 2 threads and 23 with 1 on 2 cores.
            mp.setenv("OMP_NUM_THREADS", "1")
            torch.set_num_threads(1)
        mp.setenv("TORCH_EXTENSIONS_DIR", os.environ.get("JITLOAD_TEST_EXTENSIONS_DIR")
                  or str(run_root / "torch_extensions"))
        mp.setenv("JITLOAD_CCACHE_DIR", ccache)
        # A host edit is a full build here unless a test asks for the host JIT (tests/test_hostjit.py): its
        # first use parses torch's headers, 20 s in every process, and the tests of full builds mean full builds.
        mp.setenv("JITLOAD_HOST_JIT", "0")
        yield


@pytest.fixture(scope="session")
def build_kernel():
    """``build_kernel(name)``: the kernel of kernels/<name> and its extension (CUDA sources too where nvcc
    exists), built once per session whichever test file asks first."""
    built: dict[str, tuple] = {}

    def get(name: str):
        if name not in built:
            kernel = kernels.get(name)
            built[name] = (kernel, kernel.build())
        return built[name]

    return get


@pytest.fixture(scope="session")
def all_kernels(build_kernel):
    """Every kernel of kernels/, built: name -> (kernel, extension)."""
    return {name: build_kernel(name) for name in sorted(kernels.discover())}


@pytest.fixture(autouse=True, scope="module")
def _no_background_build_outlives_its_module():
    """A kernel swap starts its full build in a process of its own, which outlives the test that made it;
    on 2 cores it would slow every test after it. A module's leftovers are stopped when it ends."""
    yield
    import jitload

    for ext in jitload.handles().values():
        ext.stop_verification()

