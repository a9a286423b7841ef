"""A headless Chromium for the HTML report's tests, driven from the command line (no extra Python
package): ``--dump-dom`` after a probe script ran in the page, ``--screenshot`` for a picture, and
``--enable-logging=stderr`` for what the page printed to its console.

The probe is a copy of the page with two scripts added: one first in <head> that records errors
(``error`` and ``unhandledrejection`` events, ``console.error``), one at the end that, once the page
has loaded, counts what each figure drew, clicks table headers, picks another placement, lists the
resources the page fetched, and writes all of it as JSON into a <pre> the dumped DOM carries back."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio", "--no-first-run",
         "--disable-extensions", "--disable-background-networking", "--disable-dev-shm-usage"]


def browser() -> str:
    """The path of a Chromium, or skip the test saying how to get one."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless browser: chromium is not installed (apt-get install -y chromium; .ci/run installs it "
                "where apt is available)")


ERRORS_FIRST = """<script>
window.__errors = [];
window.addEventListener("error", function (e) { window.__errors.push("error: " + (e.message || e.type)); }, true);
window.addEventListener("unhandledrejection", function (e) { window.__errors.push("unhandled rejection: " + e.reason); });
(function () { var ce = console.error; console.error = function () {
  window.__errors.push("console.error: " + Array.prototype.slice.call(arguments).join(" ")); return ce.apply(console, arguments); }; })();
</script>"""

PROBE = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var out = {ready: document.body.dataset.ready === "1", figures: {}, sort: {}, errors: window.__errors};
  try {
    document.querySelectorAll("div.fig").forEach(function (f) {
      out.figures[f.id] = {plot: f.classList.contains("js-plotly-plot"),
        svg: f.querySelectorAll("svg.main-svg *").length, canvas: f.querySelectorAll("canvas").length,
        bars: f.querySelectorAll("g.point path").length, slices: f.querySelectorAll("g.slice").length,
        lines: f.querySelectorAll("g.scatterlayer path.js-line").length,
        images: f.querySelectorAll("g.hm image, image").length, text: f.textContent.slice(0, 80)};
    });
    var t = document.getElementById("table"), heads = t.tHead.rows[0].cells;
    function column(k) { return Array.prototype.map.call(t.tBodies[0].rows, function (r) {
      return r.cells[k] ? r.cells[k].dataset.v : ""; }); }
    heads[1].click(); out.sort.step_up = column(1);
    heads[1].click(); out.sort.step_down = column(1);
    heads[0].click(); out.sort.name_up = column(0);
    out.sort.aria = heads[0].getAttribute("aria-sort");
    out.diff_moved = document.getElementById("diff-summary").dataset.moved;
    var pick = document.getElementById("pick"), other = null;
    for (var i = 0; i < pick.options.length; i++) if (pick.options[i].value !== pick.value) other = pick.options[i].value;
    out.picked_before = document.querySelector("#fig-timeline .gtitle") ? document.querySelector("#fig-timeline .gtitle").textContent : "";
    if (other !== null) { pick.value = other; pick.dispatchEvent(new Event("change")); }
    out.picked = other;
    out.picked_after = document.querySelector("#fig-timeline .gtitle") ? document.querySelector("#fig-timeline .gtitle").textContent : "";
    out.resources = performance.getEntriesByType("resource").map(function (r) { return r.name; });
  } catch (e) { out.errors.push("probe: " + e); }
  var pre = document.createElement("pre"); pre.id = "__probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 300); });
</script>"""


def probe(page: Path, workdir: Path, timeout: float = 120) -> tuple[dict, str]:
    """Load a probed copy of ``page``; return (what the probe found, the browser's console log lines)."""
    text = page.read_text(encoding="utf-8")
    text = text.replace("<head>", "<head>" + ERRORS_FIRST, 1)
    k = text.rindex("</body>")
    copy = workdir / ("probe-" + page.name)
    copy.write_text(text[:k] + PROBE + text[k:], encoding="utf-8")
    cmd = [browser(), *FLAGS, f"--user-data-dir={workdir / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
           "--window-size=1400,1800", "--virtual-time-budget=20000", "--dump-dom", copy.resolve().as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    m = re.search(r'<pre id="__probe">(.*?)</pre>', r.stdout, re.S)
    console = "\n".join(line for line in r.stderr.splitlines() if "CONSOLE" in line)
    if not m:
        raise AssertionError(f"the probe did not report (exit {r.returncode}); browser said:\n{r.stderr[-3000:]}")
    return json.loads(html.unescape(m.group(1))), console


def screenshot(page: Path, png: Path, workdir: Path, width: int = 1400, height: int = 2600, timeout: float = 120) -> Path:
    """A PNG of the page as loaded (after its scripts ran)."""
    cmd = [browser(), *FLAGS, f"--user-data-dir={workdir / 'chromium-profile'}", f"--window-size={width},{height}",
           "--virtual-time-budget=20000", f"--screenshot={png.resolve()}", page.resolve().as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if not png.exists() or png.stat().st_size == 0:
        raise AssertionError(f"no screenshot (exit {r.returncode}): {r.stderr[-2000:]}")
    return png
