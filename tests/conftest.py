import os
import platform

import pytest
import torch


def pytest_report_header(config):
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return [f"torch {torch.__version__} (CUDA {torch.version.cuda}), Python {platform.python_version()}, GPU: {gpu}"]


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    # Builds made by tests never land in the user's cache (session scope: module fixtures build too).
    # JITLOAD_TEST_EXTENSIONS_DIR names a scratch cache to reuse instead (the GPU run prebuilds into one).
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_EXTENSIONS_DIR", os.environ.get("JITLOAD_TEST_EXTENSIONS_DIR")
                  or str(tmp_path_factory.getbasetemp() / "torch_extensions"))
        yield
