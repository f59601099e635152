"""Reading a class report (``tasks.py report``) in a real browser, as an instructor opens it: from disk.

:func:`read_report` opens ``index.html`` through ``file://`` in headless Chromium at a screen width and
returns what a reader sees: the tables' rows as text, the size of each labelled bar of the figures
shown at that width, the smallest text in them, the page's width, every resource the page fetched
and the browser's console errors.
"""

from __future__ import annotations

import time
from pathlib import Path

from course_tools.book import browser

READ_REPORT = r"""
const out = {pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
             resources: performance.getEntriesByType('resource').map(r => r.name),
             bars: {}, smallestText: 1e9, figures: [], tables: {}};
for (const fig of document.querySelectorAll('figure')) {
  for (const layout of fig.querySelectorAll(':scope > .wide, :scope > .narrow')) {
    if (getComputedStyle(layout).display === 'none') continue;
    const box = layout.getBoundingClientRect();
    out.figures.push({id: fig.id, layout: layout.className, width: box.width});
    for (const t of layout.querySelectorAll('svg text')) {
      const r = t.getBoundingClientRect();
      if (r.height > 0) out.smallestText = Math.min(out.smallestText, r.height);
    }
    for (const g of layout.querySelectorAll('svg g[id]')) {
      const r = g.getBoundingClientRect();
      out.bars[g.id] = {width: r.width, height: r.height};
    }
  }
}
for (const t of document.querySelectorAll('table[id]'))
  out.tables[t.id] = [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()));
return out;
"""


def read_report(index: Path, width: int) -> dict:
    """What :data:`READ_REPORT` measures on ``index`` at ``width`` CSS pixels, and ``errors`` (console)."""
    reason = browser.ensure_chromium()
    assert reason is None, reason
    driver = browser.open_browser(width)
    try:
        driver.get(index.resolve().as_uri())
        deadline = time.time() + 30
        while driver.execute_script("return document.readyState") != "complete" and time.time() < deadline:
            time.sleep(0.1)
        seen = driver.execute_script(READ_REPORT)
        seen["errors"] = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        return seen
    finally:
        driver.quit()
