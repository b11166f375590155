"""A reader's first contact, end to end: headless Chromium opens JupyterLab as the container's entrypoint
serves it, runs every cell of notebooks/00_environment.ipynb (the shortest walkthrough with a plot; nbclient runs
every notebook in tests/test_notebooks.py) from the Run menu, saves, and the notebook holds no error and a
rendered plot (checked in the page and in the saved file).

Needs Debian's chromium and chromium-driver and sshd (the entrypoint starts both services): ``make
system-deps`` installs them. Selenium drives the browser through the distribution's chromedriver, so nothing
is downloaded at test time.

The waits follow JupyterLab's own signals, the kernel's status and each cell's execution count, with a
deadline per step rather than one for the whole run: on a busy machine a slow cell is given its time as long as
the cells keep finishing, and a timeout names the cell that was running (or queued) and how long each before
it took.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request

import pytest
from services import HAVE_SSHD, REPO, started

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
NOTEBOOK = "00_environment.ipynb"

NOT_QUEUED_S = 60  # Run All queues every cell at once: none queued after this long means it was not received
CELL_TIMEOUT = 600  # one cell; the slowest, doctor's compiler probe or the copy's timing, takes seconds on 2 idle cores

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER and HAVE_SSHD),
    reason="needs chromium, chromium-driver and openssh-server: run `make system-deps` (as root) to install them")]


def _browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # --no-sandbox: Chromium's sandbox cannot start as root (CI); the background-networking flags stop it
    # dialling Google on a machine with no way out (each refused connection costs a retry).
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))


def _wait(driver, what: str, condition, timeout: float, shot: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except Exception:  # the page is still changing under us (stale elements): look again
            value = None
        if value:
            return value
        time.sleep(0.5)
    driver.save_screenshot(shot)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; screenshot: {shot}")


def _prompts(driver) -> list[str]:
    """Each code cell's execution count as JupyterLab shows it: a number once run, "*" while running or queued
    behind a running cell, "" before. textContent, not .text: cells scrolled out of view are not "visible"."""
    from selenium.webdriver.common.by import By

    return [p.get_attribute("textContent").strip("[]: \xa0") for p in
            driver.find_elements(By.CSS_SELECTOR, ".jp-CodeCell .jp-InputPrompt")]


def _errors(driver) -> str:
    from selenium.webdriver.common.by import By

    return "\n".join(e.get_attribute("textContent") for e in driver.find_elements(
        By.CSS_SELECTOR, ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"))


def _kernel_status(driver) -> str | None:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook-ExecutionIndicator[data-status]")
    return found[0].get_attribute("data-status") if found else None


def _kernel_connected(port: int, token: str) -> bool:
    """Jupyter's REST API: a kernel that is idle with the page's websocket connected to it. JupyterLab's
    toolbar can read "Idle" a moment before that; a Run All issued then runs nothing."""
    url = f"http://127.0.0.1:{port}/api/kernels?token={token}"
    with urllib.request.urlopen(url, timeout=10) as response:
        kernels = json.load(response)
    return any(k.get("execution_state") == "idle" and k.get("connections", 0) > 0 for k in kernels)


def _run_all(driver, shot: str) -> None:
    from selenium.webdriver.common.by import By

    run_menu = next(m for m in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item") if m.text == "Run")
    run_menu.click()
    _wait(driver, "Run All Cells in the Run menu", lambda: next(
        i for i in driver.find_elements(By.CSS_SELECTOR, ".lm-Menu-item") if i.text.strip() == "Run All Cells"),
        30, shot).click()


def _wait_for_cells(driver, sources: list[str], shot: str, rerun=None) -> None:
    """Wait while Run All works through the cells: CELL_TIMEOUT from the last cell that finished, not a
    deadline for them all. Each finished cell is printed with its time (pytest shows it on a failure). If no
    cell has been queued NOT_QUEUED_S after Run All (the click was lost), ``rerun`` issues it once more."""
    first_lines = [s.strip().splitlines()[0] if s.strip() else "" for s in sources]
    ran: list[str] = []
    since = time.monotonic()
    started = False  # until the kernel takes the first cell, an idle kernel and empty prompts mean nothing yet
    while True:
        try:
            prompts, status = _prompts(driver), _kernel_status(driver)
        except Exception:  # the page is still changing under us (stale elements): look again
            time.sleep(0.5)
            continue
        done = next((i for i, p in enumerate(prompts) if not p.isdigit()), len(prompts))
        started = started or status == "busy" or any(p == "*" or p.isdigit() for p in prompts)
        if len(prompts) == len(sources) and done == len(sources) and status in ("idle", None):
            return
        while len(ran) < min(done, len(sources)):
            now = time.monotonic()
            ran.append(f"cell {len(ran) + 1} ({first_lines[len(ran)]!r}): {now - since:.0f} s")
            print(ran[-1], flush=True)
            since = now
        waiting = f"cell {done + 1} of {len(sources)} ({first_lines[min(done, len(sources) - 1)]!r})"
        if not started and rerun is not None and time.monotonic() - since > NOT_QUEUED_S:
            print(f"no cell queued {NOT_QUEUED_S} s after Run All: issuing it again", flush=True)
            rerun()
            rerun, since = None, time.monotonic()
            continue
        if started and status == "idle" and "*" not in prompts and done < len(sources):
            driver.save_screenshot(shot)  # the kernel went idle with cells left unrun: Run All stopped (an error)
            raise AssertionError(f"{waiting} was never run: the kernel is idle after {len(ran)} cells "
                                 f"(prompts {prompts}); screenshot: {shot}; errors shown:\n{_errors(driver)[:3000]}")
        if status in ("dead", "unknown"):
            driver.save_screenshot(shot)
            raise AssertionError(f"the kernel is {status} while running {waiting}; screenshot: {shot}")
        if time.monotonic() - since > CELL_TIMEOUT:
            driver.save_screenshot(shot)
            raise AssertionError(f"timed out after {CELL_TIMEOUT} s waiting for {waiting} (prompt "
                                 f"{prompts[done] if done < len(prompts) else '?'!r}, kernel {status}); the cells "
                                 f"before: {'; '.join(ran) or 'none'}; screenshot: {shot}")
        time.sleep(0.5)


def test_jupyterlab_runs_a_notebook_with_a_plot(tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    workspace = tmp_path / "workspace-src"
    (workspace / "notebooks").mkdir(parents=True)
    # The committed notebook holds a GPU run's outputs: serve it cleared, so what the test finds is this run's.
    nb = json.load(open(os.path.join(REPO, "notebooks", NOTEBOOK)))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    with open(workspace / "notebooks" / NOTEBOOK, "w") as f:
        json.dump(nb, f)
    shot = str(tmp_path / "jupyterlab.png")
    with started(tmp_path, str(workspace)) as svc:
        os.chmod(svc.workspace, 0o777)  # a non-root Jupyter saves the notebook back
        driver = _browser(str(tmp_path / "profile"))
        try:
            driver.get(f"http://127.0.0.1:{svc.jupyter_port}/lab/tree/notebooks/{NOTEBOOK}?token={svc.token()}")
            source = json.load(open(workspace / "notebooks" / NOTEBOOK))
            sources = ["".join(c["source"]) for c in source["cells"] if c["cell_type"] == "code"]
            code_cells = len(sources)
            # 300 s each: the page and the kernel's Python (import torch) start slowly on a busy machine
            _wait(driver, "the notebook's cells", lambda: len(driver.find_elements(By.CSS_SELECTOR, ".jp-CodeCell"))
                  == code_cells, 300, shot)
            _wait(driver, "the kernel to start", lambda: "Idle" in driver.find_element(
                By.CSS_SELECTOR, ".jp-NotebookPanel-toolbar").get_attribute("innerHTML") or driver.find_elements(
                By.CSS_SELECTOR, ".jp-Notebook-ExecutionIndicator[data-status='idle']"), 300, shot)
            _wait(driver, "the kernel's connection to the page", lambda: _kernel_connected(
                svc.jupyter_port, svc.token()), 300, shot)
            _run_all(driver, shot)
            _wait_for_cells(driver, sources, shot, rerun=lambda: _run_all(driver, shot))
            errors = driver.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output[data-mime-type="
                                          "'application/vnd.jupyter.stderr'] .jp-RenderedText")
            texts = [e.get_attribute("textContent") for e in errors]
            tracebacks = [t for t in texts if "Traceback" in t or "Error:" in t]
            assert not tracebacks, tracebacks[0][:3000]
            images = driver.find_elements(By.CSS_SELECTOR, ".jp-RenderedImage img")
            assert images and all(int(i.get_attribute("naturalWidth") or 0) > 100 for i in images)
            driver.find_element(By.CSS_SELECTOR, ".jp-Notebook").send_keys(Keys.CONTROL, "s")
            saved = os.path.join(svc.workspace, "notebooks", NOTEBOOK)

            def saved_all():
                # Every code cell numbered, not just some outputs: JupyterLab autosaves every 120 s, and an
                # autosave from the middle of the run (cells still to run) would otherwise pass for this save.
                cells = json.load(open(saved))["cells"]
                return all(c.get("execution_count") for c in cells if c["cell_type"] == "code")

            # 150 s: should the keystroke be lost, the next autosave (120 s) still writes the finished state.
            _wait(driver, "the save of the finished notebook", saved_all, 150, shot)
        finally:
            driver.quit()
        nb = json.load(open(saved))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["execution_count"] for c in code)
    outputs = [o for c in code for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
