"""The report's page in a real browser (issue 50): Debian's Chromium, headless, driven by Selenium through
chromedriver.  It opens from disk with nothing from the network and no console error; the suspects, their numbers,
the memory bar and the treemap are on it; clicking a treemap box shows that object's children, "up" goes back;
a table sorts by the column clicked.  Without Chromium the test is skipped, except where .ci/run sets
CLRLAYOUT_REQUIRE_BROWSER=1 (CI installs it): there its absence fails."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.support.cli import run
from tests.support.samples import SAMPLES

pytestmark = pytest.mark.oracle

AFTER = str(SAMPLES / "leak.coreclr-10.0.0.linux-x64.after.core")
BEFORE = str(SAMPLES / "leak.coreclr-10.0.0.linux-x64.before.core")


@pytest.fixture(scope="module")
def browser():
    driver_path = shutil.which("chromedriver")
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if not (driver_path and binary):
        if os.environ.get("CLRLAYOUT_REQUIRE_BROWSER"):
            pytest.fail("chromium and chromedriver are required here (CLRLAYOUT_REQUIRE_BROWSER)")
        pytest.skip("no chromium/chromedriver (Debian: apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    import contextlib
    import io

    from clrlayout.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["report", AFTER, BEFORE, "-o", str(out), "-q"]) == 0
        assert main(["report", AFTER, "--format", "json", "-q"]) == 0
    data = json.loads(buffer.getvalue().splitlines()[-1])
    return out, data


def data_growth(path) -> list:
    """The growth the page was made with (the report of the pair, as JSON)."""
    import contextlib
    import io

    from clrlayout.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["report", AFTER, BEFORE, "--format", "json", "-q"]) == 0
    return json.loads(buffer.getvalue())["growth"]


def test_the_page_in_chromium(browser, page):
    from selenium.webdriver.common.by import By

    path, data = page
    browser.get(path.as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    suspects = browser.find_elements(By.CSS_SELECTOR, ".suspect")
    assert len(suspects) == len(data["suspects"]) > 0
    shown = [int(s.find_element(By.CSS_SELECTOR, ".retained").text.replace(",", "")) for s in suspects]
    assert shown == [s["retained_size"] for s in data["suspects"]]
    assert browser.find_elements(By.CSS_SELECTOR, "#memory-bar .cell")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#growth-lines .growth-line")) == min(8, len(data_growth(path)))
    boxes = browser.find_elements(By.CSS_SELECTOR, "#treemap .node")
    tops = data["tree"]
    assert len(boxes) == len([t for t in tops if t["retained_size"] > 0])
    # the boxes tile the treemap, each as big as its share of what the level retains, and squarified: the
    # area-weighted aspect ratio near 1 (slices and dice give long thin strips)
    rects = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#treemap .node'), function (d) {"
        " return [parseFloat(d.style.left), parseFloat(d.style.top), parseFloat(d.style.width),"
        " parseFloat(d.style.height), parseInt(d.dataset.retained)]; });")
    width, height = browser.execute_script("var b = document.getElementById('treemap');"
                                           "return [b.clientWidth, b.clientHeight];")
    total = sum(r[4] for r in rects)
    for x, y, w, h, retained in rects:
        assert abs(w * h / (width * height) - retained / total) < 1e-4  # the styles' pixels keep 3 decimals or so
        assert -0.01 <= x and x + w <= width + 0.01 and -0.01 <= y and y + h <= height + 0.01
    for i, a in enumerate(rects):  # no two overlap
        for b in rects[i + 1:]:
            overlap = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])) * \
                max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
            assert overlap < 1  # square pixels: touching edges, rounded
    aspect = sum(max(w / h, h / w) * w * h for _, _, w, h, _ in rects if w and h) / (width * height)
    assert aspect < 3, aspect
    # the biggest box is the biggest retainer; clicking it shows its children
    first = max(boxes, key=lambda b: int(b.get_attribute("data-retained")))
    assert first.get_attribute("data-address") == tops[0]["address"]
    first.click()
    kids = browser.find_elements(By.CSS_SELECTOR, "#treemap .node")
    assert [k.get_attribute("data-address") for k in kids] == \
        [c["address"] for c in tops[0]["children"] if c["retained_size"] > 0]
    assert browser.find_element(By.ID, "crumbs").text.endswith(tops[0]["type"])
    browser.find_element(By.ID, "treemap-up").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#treemap .node")) == len(boxes)
    # a table sorts by the column clicked
    table = browser.find_element(By.CSS_SELECTOR, ".suspect table.sortable")
    table.find_elements(By.TAG_NAME, "th")[2].click()
    values = [int(r.find_elements(By.TAG_NAME, "td")[2].text.replace(",", ""))
              for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert values == sorted(values)
    assert browser.get_log("browser") == [] or all(e["level"] != "SEVERE" for e in browser.get_log("browser"))
