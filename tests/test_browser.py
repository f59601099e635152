"""The built book in a real browser, as a student reads it: headless Chromium at desktop and phone width.

Every page of the table of contents, served over HTTP from ``_build/html``, is opened at
1280 and 400 CSS pixels: it loads without console errors, its equations are typeset and
none is clipped, its images load, and the page itself does not run wider than the screen.
On the same visit it is read as a reader reads it: no display equation wider than the
column at desktop width, none whose start is out of reach at either width; every figure
opens at full size, and its smallest label, measured from the SVG the link gives, is at
least 9 CSS pixels on a phone; long names break after ``_`` or ``.``, never inside a word;
figures are numbered per chapter ("Fig. 8.3"), in captions and cross-references alike.
Search finds a term, and each assignment's download button gives the release notebook
byte for byte. Chromium comes from Debian's packages (``course_tools.book.browser``); where it
cannot be installed the tests are skipped with the reason.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from conftest import after_book
from course_tools import ROOT
from course_tools.book import browser, public

pytestmark = pytest.mark.slow
WIDTHS = (1280, 400)
MIN_LABEL_PX = 9  # the smallest text of a figure, in CSS px, on a 400 px screen


def _toc_pages(root) -> list[str]:
    """Every page of the table of contents, without its suffix: ``chapters/ch01_counts``."""
    return [path.with_suffix("").as_posix() for path in public.toc_files(root)]


@pytest.fixture(scope="module")
def site(html):
    reason = browser.ensure_chromium()
    if reason:
        pytest.skip(reason)
    with browser.serve(html) as url:
        yield url


@after_book
def _pages_read_at_every_width(html) -> dict:
    """``width -> {page -> (measurements, console errors)}`` for every page of the toc, read in the background
    as soon as the book is built (its own server and browser; nothing shared with the tests running beside it);
    ``{"skip": reason}`` where Chromium cannot be had."""
    reason = browser.ensure_chromium()
    if reason:
        return {"skip": reason}
    out = {}
    with browser.serve(html) as site:
        for width in WIDTHS:
            driver = browser.open_browser(width)
            reports = out[width] = {}
            try:
                for page in _toc_pages(ROOT):
                    driver.get(f"{site}{page}.html")
                    typeset = browser.wait_until_typeset(driver)
                    measured = driver.execute_script(browser.MEASURE_PAGE, width)
                    measured["typeset_in_time"] = typeset
                    measured["reading"] = driver.execute_script(browser.MEASURE_READING)
                    errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
                    reports[page] = (measured, errors)
            finally:
                driver.quit()
    return out


@pytest.fixture(scope="module", params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def page_reports(request, site):
    """``page -> (measurements, console errors)`` for every page of the toc at one width."""
    read = _pages_read_at_every_width.result()
    if "skip" in read:
        pytest.skip(read["skip"])
    reports = read[request.param]
    print(f"\nbrowser report at {request.param} px:")
    for page, (m, errors) in reports.items():
        print(f"  {page:45} equations {m['typeset']}/{m['displays']} typeset, clipped {len(m['clipped'])}, "
              f"images {m['images']} (no alt {len(m['noAlt'])}, no caption {len(m['noCaption'])}), "
              f"console errors {len(errors)}, width {m['pageWidth']}/{m['viewport']}")
        r = m["reading"]
        labels = [f["labelPx"] for f in r["figures"] if f["labelPx"] is not None]
        smallest = f"{min(labels):.1f} px" if labels else "-"
        print(f"  {'':45} equations too wide {len(r['tooWide'])}, start out of reach {len(r['startHidden'])}, "
              f"smallest figure label {smallest}, names wrapped {r['wrappedNames']}/{r['names']} "
              f"(mid-word {len(r['midWord'])}), captions {r['captions'][:1] + r['captions'][-1:]}")
    return request.param, reports


def test_every_page_loads_without_console_errors(page_reports):
    _width, reports = page_reports
    problems = {page: errors for page, (_m, errors) in reports.items() if errors}
    assert not problems, json.dumps(problems, indent=1)[:3000]


def test_every_equation_is_typeset_and_none_is_clipped(page_reports):
    _width, reports = page_reports
    assert sum(m["displays"] for m, _e in reports.values()) > 50, "the chapters have display equations"
    for page, (m, _errors) in reports.items():
        assert m["typeset_in_time"], f"{page}: MathJax did not finish"
        assert m["typeset"] == m["displays"], f"{page}: {m['displays'] - m['typeset']} equations left as TeX"
        assert not m["clipped"], f"{page}: clipped equations: {m['clipped'][:5]}"


def test_images_load_have_alt_text_and_captions_and_pages_fit_the_screen(page_reports):
    width, reports = page_reports
    assert sum(m["images"] for m, _e in reports.values()) >= 20, "the chapters have figures"
    for page, (m, _errors) in reports.items():
        assert not m["brokenImages"], f"{page}: images that do not load: {m['brokenImages']}"
        assert not m["noAlt"], f"{page}: images without alt text a reader can use: {m['noAlt'][:3]}"
        assert not m["noCaption"], f"{page}: figures of the code's output without a numbered caption: {m['noCaption'][:3]}"
        assert m["pageWidth"] <= m["viewport"] + 1, \
            f"{page} at {width} px: the page is {m['pageWidth']} px wide, so the reader must scroll sideways: " \
            f"{m['wide'][:3]}"


def test_no_display_equation_is_wider_than_the_column_or_hides_its_start(page_reports):
    width, reports = page_reports
    assert sum(m["reading"]["equations"] for m, _e in reports.values()) > 50, "the chapters have display equations"
    for page, (m, _errors) in reports.items():
        reading = m["reading"]
        if width >= 1280:  # on a phone a long equation may scroll inside its block; at desktop width none needs to
            assert not reading["tooWide"], f"{page} at {width} px: equations wider than the column: {reading['tooWide']}"
        assert not reading["startHidden"], \
            f"{page} at {width} px: equations whose start cannot be seen: {reading['startHidden']}"


def test_figures_open_at_full_size_and_their_labels_can_be_read(page_reports):
    width, reports = page_reports
    figures = [(page, f) for page, (m, _e) in reports.items() for f in m["reading"]["figures"]]
    assert len(figures) >= 20, "the chapters have figures"
    for page, f in figures:
        assert f["link"] and f["linkIsImage"] and f["linkStatus"] == 200, \
            f"{page}: figure {f['src']} does not link to its image file: {f}"
        assert f["labelPx"] is not None, f"{page}: figure {f['src']} has no text to measure (an SVG with text expected)"
    if width <= 400:
        small = [(page, f["src"], round(f["labelPx"], 1), f["shown"]) for page, f in figures
                 if f["labelPx"] < MIN_LABEL_PX]
        assert not small, f"figures whose smallest label is under {MIN_LABEL_PX} px at {width} px " \
                          f"(page, image, label px, shown width): {small[:5]}"


def test_names_break_only_after_underscore_or_dot(page_reports):
    width, reports = page_reports
    assert sum(m["reading"]["wrappedNames"] for m, _e in reports.values()) > 10, \
        "some long names wrap at this width, or the check checks nothing"
    problems = {page: m["reading"]["midWord"][:3] for page, (m, _e) in reports.items() if m["reading"]["midWord"]}
    assert not problems, f"names broken inside a word at {width} px: {problems}"


def test_figures_are_numbered_per_chapter(page_reports):
    _width, reports = page_reports
    chapters = {page: m["reading"] for page, (m, _e) in reports.items() if re.search(r"/ch\d+_", page)}
    assert sum(len(r["captions"]) for r in chapters.values()) >= 20, "the chapters have numbered figures"
    for page, reading in chapters.items():
        number = int(re.search(r"/ch(\d+)_", page).group(1))
        expected = [f"Fig. {number}.{k}" for k in range(1, len(reading["captions"]) + 1)]
        assert reading["captions"] == expected, f"{page}: captions numbered {reading['captions']}, not {expected}"
        for ref in reading["numrefs"]:
            assert re.fullmatch(r"Fig\. \d+\.\d+", ref["text"]), f"{page}: reference {ref}"
            if ref["caption"] is not None:  # a figure of the same page: the reference shows its caption's number
                assert ref["text"] == ref["caption"], f"{page}: reference {ref} shows another number than its figure"


def test_search_finds_a_term(site):
    driver = browser.open_browser(1280)
    try:
        driver.get(f"{site}search.html?q=perplexity")
        deadline, links = time.time() + 30, []
        while time.time() < deadline and not links:
            time.sleep(0.5)
            links = driver.execute_script(
                "return [...document.querySelectorAll('#search-results a')].map(a => a.getAttribute('href'))")
    finally:
        driver.quit()
    assert any("ch03_rnn" in link for link in links), links


def test_each_assignment_download_is_the_release_notebook(site, root):
    for notebook in sorted((root / "exercises").glob("*/*.ipynb")):
        relative = notebook.relative_to(root).as_posix()
        html = urllib.request.urlopen(f"{site}{relative.removesuffix('.ipynb')}.html").read().decode("utf-8")
        assert f"_sources/{relative}" in html, f"{relative}: no download link to the notebook"
        downloaded = urllib.request.urlopen(f"{site}_sources/{relative}").read()
        assert downloaded == notebook.read_bytes(), f"{relative}: the download differs from the release"
