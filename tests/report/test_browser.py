"""Render each report in headless Chromium: images load, the verdict is visible at 1280 px.

CI installs Debian's ``chromium`` (``apt-get install -y chromium``); without it these tests
skip with that reason. A probe script is appended to a *copy* of each report (the reports
themselves carry no scripts); after the load event it records on ``<body>`` how many images
the browser decoded (``naturalWidth > 0``), where the verdict box sits and the page width,
and ``--dump-dom`` hands those back. A screenshot of the first screen must show the verdict
box's colour.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _report_data import make_fit, make_formula_fit, save_fit, write_simulation_dir

from tomstats.report import write_fit_report, write_simulation_report
from tomstats.report._document import write_document
from tomstats.report.fit import fit_document

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed "
                       "(CI: apt-get install -y chromium)"),
]
WIDTH, HEIGHT = 1280, 2000
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = Array.from(document.images);
  const b = document.body;
  b.dataset.images = imgs.length;
  b.dataset.broken = imgs.filter(i => !i.complete || i.naturalWidth === 0).length;
  // decoded images whose pixels are not all one colour, named by their alt text's start
  const drawn = imgs.filter(i => {
    if (!i.complete || i.naturalWidth === 0) return false;
    const c = document.createElement('canvas');
    c.width = i.naturalWidth; c.height = i.naturalHeight;
    const ctx = c.getContext('2d');
    ctx.drawImage(i, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    for (let k = 4; k < d.length; k += 4) {
      if (d[k] !== d[0] || d[k + 1] !== d[1] || d[k + 2] !== d[2]) return true;
    }
    return false;
  });
  b.dataset.nonblank = drawn.length;
  b.dataset.alts = drawn.map(i => i.alt.split(' ').slice(0, 2).join(' ')
                                     .replace(/[^A-Za-z ]/g, '')).join('|');
  const v = document.getElementById('verdict');
  if (v) {
    const r = v.getBoundingClientRect();
    b.dataset.verdictTop = Math.round(r.top);
    b.dataset.verdictBottom = Math.round(r.bottom);
    b.dataset.verdictText = v.innerText.split('\\n')[0];
  }
  b.dataset.scrollWidth = document.documentElement.scrollWidth;
  b.dataset.probe = 'done';
});
</script>"""
# background colours of the verdict box (pass / fail / unknown) in the report CSS
VERDICT_RGB = {"PASS": (0xDA, 0xFB, 0xE1), "FAIL": (0xFF, 0xEB, 0xE9),
               "UNKNOWN": (0xFF, 0xF8, 0xC5)}


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
           f"--window-size={WIDTH},{HEIGHT}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)


def probe(html: Path, tmp: Path) -> dict[str, str]:
    """Load a probed copy of ``html`` and return the ``data-*`` attributes set on body."""
    copy = tmp / f"probe-{html.name}"
    copy.write_text(html.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                    encoding="utf-8")
    res = _chromium(["--virtual-time-budget=10000", "--dump-dom", copy.as_uri()],
                    tmp / "profile-dom")
    body = re.search(r"<body([^>]*)>", res.stdout)
    assert body, f"chromium produced no DOM (rc {res.returncode}): {res.stderr[-800:]}"
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1)))


def screenshot(html: Path, tmp: Path) -> np.ndarray:
    """RGB array of the first screen (1280 × 2000) of ``html`` as Chromium draws it."""
    from PIL import Image

    png = tmp / f"shot-{html.stem}.png"
    res = _chromium([f"--screenshot={png}", html.as_uri()], tmp / "profile-shot")
    assert png.is_file(), f"no screenshot (rc {res.returncode}): {res.stderr[-800:]}"
    return np.asarray(Image.open(png).convert("RGB"))


def check_page(html: Path, tmp: Path, n_images: int, verdict: str) -> dict[str, str]:
    info = probe(html, tmp)
    assert info.get("probe") == "done", info
    assert int(info["images"]) == n_images
    assert int(info["broken"]) == 0
    assert int(info["nonblank"]) == n_images
    assert info["verdict-text"].endswith(f": {verdict}")
    assert 0 <= int(info["verdict-top"]) < int(info["verdict-bottom"]) <= 1000  # first screen
    assert int(info["scroll-width"]) <= WIDTH  # no horizontal scrolling at 1280 px
    img = screenshot(html, tmp)
    assert img.shape[1] == WIDTH
    assert img.std() > 10, "blank screenshot"
    rgb = np.array(VERDICT_RGB[verdict])
    box = np.all(np.abs(img[:1000].astype(int) - rgb) <= 2, axis=-1)
    assert box.sum() > 5000, "verdict box colour not visible on the first screen"
    return info


#: Start of the captions (alt text) of the fit report's result plots.
RESULT_PLOTS = {"forest": "Forest plot", "caterpillar": "Caterpillar plot"}


def test_simulation_report_in_browser(tmp_path: Path) -> None:
    sim = write_simulation_dir(tmp_path / "sim")
    html = write_simulation_report(sim, tmp_path / "sim.html")
    check_page(html, tmp_path, n_images=5, verdict="FAIL")


def test_fit_report_in_browser(tmp_path: Path) -> None:
    # a foreign InferenceData: reported from memory (the fit file reader refuses it)
    html = write_document(fit_document(make_fit(seed=11, chains=4, draws=300), "fit.nc"),
                          tmp_path / "fit.html")
    info_verdict = "PASS" if 'data-verdict="PASS"' in html.read_text() else "FAIL"
    info = check_page(html, tmp_path, n_images=8, verdict=info_verdict)
    alts = info["alts"].split("|")
    # a structural fit: forest (α, γ, δ, σ, capabilities), caterpillar of the capabilities,
    # predictions by context × ToM order cell, each decoded and not blank
    assert alts.count("Forest plot") == 1 and alts.count("Caterpillar plot") == 1
    assert "Accuracy by" in alts


def test_crossed_formula_fit_report_in_browser(tmp_path: Path) -> None:
    fit = save_fit(make_formula_fit(seed=0), tmp_path / "crossed.nc")
    html = write_fit_report(fit, tmp_path / "crossed.html", sweep_draws=0)
    text = html.read_text(encoding="utf-8")
    verdict = re.search(r'data-verdict="(PASS|FAIL)"', text).group(1)
    info = check_page(html, tmp_path, n_images=9, verdict=verdict)
    alts = info["alts"].split("|")
    # forest, a caterpillar per grouping factor (model, item), the prediction plot
    assert alts.count("Forest plot") == 1 and alts.count("Caterpillar plot") == 2
    assert "Predicted Pcorrect" in alts


def test_probe_detects_broken_image(tmp_path: Path) -> None:
    """The check can fail: a page with a corrupt PNG data URI is caught."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><section id="verdict">x: PASS</section>'
                    '<img src="data:image/png;base64,iVBORw0KGgoAAAAAbm90IGEgcG5n">'
                    "</body></html>", encoding="utf-8")
    info = probe(page, tmp_path)
    assert info["images"] == "1" and info["broken"] == "1"


def test_probe_detects_blank_image(tmp_path: Path) -> None:
    """The check can fail: a decodable but all-white PNG is not counted as drawn."""
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 30), "white").save(buf, format="PNG")
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    page = tmp_path / "blank.html"
    page.write_text(f'<!DOCTYPE html><html><body><img alt="Forest plot" '
                    f'src="data:image/png;base64,{data}"></body></html>', encoding="utf-8")
    info = probe(page, tmp_path)
    assert info["images"] == "1" and info["broken"] == "0"
    assert info["nonblank"] == "0" and info["alts"] == ""


def test_fit_report_of_the_shipped_log_in_browser(tmp_path: Path) -> None:
    """The CLI path on the project's own data: fit the shipped SmolLM2 log, report, view."""
    import warnings

    from tomstats.cli import main

    log = Path(__file__).resolve().parents[2] / "data" / "smollm2_storysim_log.jsonl"
    fit = tmp_path / "smollm2.nc"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short fit may fail a diagnostic: said in the report
        assert main(["fit", str(log), "--map", "item=story_id", "--model", "structural",
                     "--chains", "2", "--draws", "150", "--tune", "150", "--no-progress",
                     "--allow-warnings", "--out", str(fit)]) == 0
        html = tmp_path / "smollm2.html"
        assert main(["report", str(fit), "--out", str(html)]) == 0
    text = html.read_text(encoding="utf-8")
    verdict = re.search(r'data-verdict="(PASS|FAIL)"', text).group(1)
    info = probe(html, tmp_path)
    assert info.get("probe") == "done", info
    assert int(info["images"]) >= 7 and int(info["broken"]) == 0
    assert int(info["nonblank"]) == int(info["images"])
    alts = info["alts"].split("|")
    assert "Forest plot" in alts and "Caterpillar plot" in alts and "Accuracy by" in alts
    assert info["verdict-text"].endswith(f": {verdict}")
    assert "Calibrated η² decomposition" in text and "smollm2" in text.lower()


def test_power_report_in_browser(tmp_path: Path) -> None:
    import tomstats
    from tomstats.planning.result import write_power
    from tomstats.simulation.study import StudyConfig

    res = tomstats.power(StudyConfig(), along={"questions_per_cell": [10, 40]},
                         tests=["anova:interaction"], replicates=20, progress=False)
    write_power(res, tmp_path / "pw")
    html = write_simulation_report(tmp_path / "pw", tmp_path / "power.html")
    info = probe(html, tmp_path)
    assert info.get("probe") == "done", info
    assert info["images"] == "1" and info["broken"] == "0"
    assert int(info["scroll-width"]) <= WIDTH
