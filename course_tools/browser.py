"""A real browser on the built book: headless Chromium from the system's packages, driven by Selenium.

Nothing is downloaded: the browser and its driver are Debian's ``chromium`` and
``chromium-driver`` (installed with ``apt-get`` when missing and we may), and
Selenium is told where they are, so it never fetches a driver of its own.

- :func:`ensure_chromium` finds (or installs) the browser, or says why it cannot;
- :func:`serve` serves a folder over HTTP on 127.0.0.1, as a reader's browser would get it;
- :func:`open_browser` starts the browser at a given window width;
- :data:`MEASURE_PAGE` is the script that measures a loaded page.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]


def ensure_chromium() -> str | None:
    """Return ``None`` when Chromium and its driver are ready, else the reason they are not.

    Installs Debian's ``chromium`` and ``chromium-driver`` when they are missing and
    this process may (root, ``apt-get`` present).
    """
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return None
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return "Chromium is not installed and cannot be installed here (needs root and apt-get): " \
               "apt-get install chromium chromium-driver"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"]):
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            return f"{' '.join(command)} failed: {result.stderr[-500:]}"
    return None if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists() else "apt-get did not install Chromium"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no request log in the test output
        pass


@contextlib.contextmanager
def serve(folder: Path):
    """Serve ``folder`` on ``http://127.0.0.1:<free port>/`` while the block runs; yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def open_browser(width: int, height: int = 900):
    """A headless Chromium whose page is ``width`` CSS pixels wide (a phone: 400); the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--window-size={max(width, 500)},{height}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    # A window cannot be narrower than 500 px; emulate the phone's viewport instead.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
    return driver


def wait_until_typeset(driver, timeout: float = 30.0) -> bool:
    """Wait until the page has loaded and MathJax has typeset it; return whether it did in time."""
    deadline = time.time() + timeout
    # MathJax 3 replaces the TeX of each equation by an <mjx-container>; done when none is left
    script = ("return document.readyState === 'complete' && "
              "[...document.querySelectorAll('div.math, span.math')].every(m => m.querySelector('mjx-container'))")
    while time.time() < deadline:
        if driver.execute_script(script):
            time.sleep(0.3)  # let the last layout settle
            return True
        time.sleep(0.25)
    return False


MEASURE_PAGE = r"""
const width = arguments[0];  // the screen's width in CSS pixels (a phone's layout grows to fit wide content)
const out = {displays: 0, typeset: 0, clipped: [], images: 0, brokenImages: [],  // noAlt, noCaption below
             pageWidth: document.documentElement.scrollWidth, viewport: width};
for (const m of document.querySelectorAll('div.math')) {
  out.displays += 1;
  if (m.querySelector('mjx-container')) out.typeset += 1;
  // clipped: the typeset equation is wider than the box it sits in, and that box (or the block
  // around it) hides the rest instead of letting the reader scroll to it
  const root = m.querySelector('mjx-container');
  if (root) {
    const hides = el => ['hidden', 'clip'].includes(getComputedStyle(el).overflowX);
    const lost = root.scrollWidth - root.clientWidth;
    const beyond = root.getBoundingClientRect().right - m.getBoundingClientRect().right;
    if ((lost > 1 && hides(root)) || (beyond > 1 && hides(m)))
      out.clipped.push(m.textContent.trim().slice(0, 50) + ' (' + Math.max(lost, beyond) + ' px)');
  }
}
out.noAlt = []; out.noCaption = [];
for (const img of document.querySelectorAll('article img')) {
  out.images += 1;
  const src = img.getAttribute('src').slice(0, 80), alt = (img.getAttribute('alt') || '').trim();
  if (!img.complete || img.naturalWidth === 0) out.brokenImages.push(src);
  // alt text a reader can use: words, not a file name or a hash
  if (alt.split(/\s+/).length < 4 || /^[0-9a-f]{16,}/.test(alt)) out.noAlt.push(src + ' alt=' + JSON.stringify(alt));
  const figure = img.closest('figure');
  if (img.closest('.cell_output') && !(figure && figure.querySelector('figcaption'))) out.noCaption.push(src);
}
// what makes the page wider than the screen: the innermost elements that stick out of it,
// outside any box the reader can scroll (or that hides them) and not pinned to the screen
out.wide = [];
if (out.pageWidth > width + 1) {
  const contained = el => {
    for (let p = el.parentElement; p; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (['auto', 'scroll', 'hidden', 'clip'].includes(s.overflowX) || s.position === 'fixed') return true;
    }
    return false;
  };
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.right > width + 1 && getComputedStyle(el).position !== 'fixed' && !contained(el)
        && ![...el.children].some(c => c.getBoundingClientRect().right > width + 1))
      out.wide.push(el.tagName.toLowerCase() + ' ' + Math.round(r.right) + ' px: ' + (el.textContent || '').trim().slice(0, 60));
  }
}
return out;
"""
"""Measures a typeset page: display equations, how many were typeset and which are clipped,
images that do not load or lack alt text or a caption, and the page's width against the viewport
(with the elements that stick out when it is wider)."""
