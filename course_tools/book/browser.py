"""A real browser on the built book: headless Chromium from the system's packages, driven by Selenium.

Nothing is downloaded: the browser and its driver are Debian's ``chromium`` and
``chromium-driver`` (installed with ``apt-get`` when missing and we may), and
Selenium is told where they are, so it never fetches a driver of its own.

- :func:`ensure_chromium` finds (or installs) the browser, or says why it cannot;
- :func:`serve` serves a folder over HTTP on 127.0.0.1, as a reader's browser would get it;
- :func:`open_browser` starts the browser at a given window width;
- :data:`MEASURE_PAGE` is the script that measures a loaded page;
- :data:`MEASURE_READING` measures what a reader reads: how wide each display equation is and
  whether its start can be seen, the size of each figure's smallest label and its full-size link,
  where long names break, and the figure numbers of captions and cross-references.
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


MEASURE_READING = r"""
const out = {equations: 0, tooWide: [], startHidden: [], figures: [], names: 0, wrappedNames: 0, midWord: [],
             captions: [], numrefs: []};
// Display equations: wider than the text column (the block it sits in), and whether its first
// symbol can be seen with the block scrolled to its start.
for (const m of document.querySelectorAll('article div.math')) {
  const root = m.querySelector('mjx-container'), math = root && root.querySelector('mjx-math');
  if (!math) continue;
  out.equations += 1;
  root.scrollLeft = 0;
  const r = math.getBoundingClientRect(), label = m.textContent.trim().slice(0, 40);
  if (r.width > m.clientWidth + 1) out.tooWide.push(label + ' (' + Math.round(r.width) + ' > ' + m.clientWidth + ' px)');
  const left = Math.max(root.getBoundingClientRect().left, m.getBoundingClientRect().left, 0);
  if (r.left < left - 1) out.startHidden.push(label + ' (' + Math.round(left - r.left) + ' px out of reach)');
}
// Figures: the size, in CSS px, of the smallest text the SVG draws (its font size in viewBox units
// times the shown width over the viewBox width), read from the file the image links to.
for (const img of document.querySelectorAll('article figure img')) {
  const link = img.closest('a'), shown = img.getBoundingClientRect().width;
  const fig = {src: img.getAttribute('src').split('/').pop().slice(0, 16), shown: Math.round(shown),
               link: link ? link.href : null, linkIsImage: !!link && link.href === img.currentSrc,
               linkStatus: null, labelPx: null};
  if (link) {
    const request = new XMLHttpRequest();
    request.open('GET', link.href, false);  // synchronous: one small file, same origin
    request.send();
    fig.linkStatus = request.status;
    const svg = new DOMParser().parseFromString(request.responseText, 'image/svg+xml').querySelector('svg');
    if (request.status === 200 && svg && svg.viewBox.baseVal && svg.viewBox.baseVal.width) {
      const sizes = [];
      for (const t of svg.querySelectorAll('text, tspan')) {
        const style = (t.getAttribute('style') || '') + ';font-size:' + (t.getAttribute('font-size') || '');
        const found = style.match(/font-size:\s*([\d.]+)(px)?\s*[;'"]/) || style.match(/font:[^;]*?([\d.]+)px/);
        if (found) sizes.push(parseFloat(found[1]));
      }
      if (sizes.length) fig.labelPx = Math.min(...sizes) * shown / svg.viewBox.baseVal.width;
    }
  }
  out.figures.push(fig);
}
// Names: in inline code, tables and API signatures, a line may end inside a name only after "_" or "."
// (or at a space or punctuation), never between two letters or digits.
const word = /[\p{L}\p{N}]/u, scopes = 'article code.literal, article dt.sig, article td, article th';
for (const el of document.querySelectorAll(scopes)) {
  if (el.parentElement && el.parentElement.closest(scopes)) continue;
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT, {acceptNode: n =>  // not the text of equations
    n.parentElement.closest('mjx-container') ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  let prev = null, lines = 0;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.data, whole = document.createRange();
    whole.selectNodeContents(node);
    const several = whole.getClientRects().length > 1;
    for (let i = 0; i < text.length; i += (several || i === text.length - 1 ? 1 : Math.max(1, text.length - 1))) {
      if (/\s/.test(text[i])) { prev = null; continue; }  // a line may end at a space
      const range = document.createRange();
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect) continue;
      if (prev && rect.top > prev.top + rect.height / 2) {
        lines += 1;
        if (word.test(prev.ch) && word.test(text[i]))
          out.midWord.push(el.textContent.trim().slice(0, 60) + ': ' + prev.ch + '|' + text[i]);
      }
      prev = {ch: text[i], top: rect.top};
    }
  }
  out.names += 1;
  if (lines) out.wrappedNames += 1;
}
// Figure numbers: every caption, and every cross-reference to a figure with the caption it points to.
for (const n of document.querySelectorAll('article figcaption .caption-number')) out.captions.push(n.textContent.trim());
for (const ref of document.querySelectorAll('article a span.std-numref')) {
  const href = ref.parentElement.getAttribute('href') || '', target = href.startsWith('#') ?
    document.getElementById(href.slice(1)) : null;
  const caption = target && target.querySelector('.caption-number');
  out.numrefs.push({text: ref.textContent.trim(), href: href, caption: caption ? caption.textContent.trim() : null});
}
return out;
"""
"""Measures what a reader reads on a loaded page: display equations wider than the column or whose start is
out of reach, each figure's smallest label in CSS px and its full-size link, line breaks inside names
(``midWord``), and the figure numbers of captions and cross-references."""
