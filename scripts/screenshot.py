"""Headless screenshots of the site with Debian's Chromium, against a real `streamlit run` server.

    .venv/bin/python scripts/screenshot.py                         # docs/screenshot.png (home, English)
    .venv/bin/python scripts/screenshot.py --all out/              # every page, both languages, whole pages
    .venv/bin/python scripts/screenshot.py --all out/ --width 390  # the same on a phone's width

Streamlit scrolls inside its own container (the document itself is one viewport high), so a "full page"
screenshot shows only the viewport: for a whole page the viewport is made as tall as the content, measured
after the page has drawn, and measured again until it stops growing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playwright.sync_api import sync_playwright  # noqa: E402

from harness.server import CHROMIUM, CHROMIUM_ARGS, PAGES, ROOT, streamlit_server, wait_ready  # noqa: E402

# The height of everything the page shows: the scrolling containers' content (main and sidebar) and the document.
CONTENT_HEIGHT_JS = """() => {
  const heights = [document.documentElement.scrollHeight, document.body.scrollHeight];
  for (const sel of ["[data-testid='stMain']", "[data-testid='stAppViewContainer']", "[data-testid='stSidebarContent']",
                     "[data-testid='stMainBlockContainer']"]) {
    const el = document.querySelector(sel);
    if (el) heights.push(el.scrollHeight, Math.ceil(el.getBoundingClientRect().bottom));
  }
  return Math.max(...heights);
}"""
MAX_HEIGHT = 30_000  # px; Chromium draws a screenshot up to 16,384 px per tile and stitches them, but keep it sane


def content_height(page) -> int:
    return int(page.evaluate(CONTENT_HEIGHT_JS))


def fit_to_content(page, width: int, min_height: int) -> int:
    """Grow the viewport until it holds the whole page (charts and lazy blocks may grow as it does)."""
    height = min_height
    for _ in range(6):
        want = min(MAX_HEIGHT, content_height(page))
        if want <= height:
            break
        height = want
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(400)  # let Vega redraw at the new size
        wait_ready(page)
    return height


def shoot(
    targets: list[tuple[str, str, Path]],
    width: int,
    whole: bool,
    height: int = 900,
    query: str = "",
) -> None:
    with streamlit_server() as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
        for path, lang, out in targets:
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"{base}/{path}?lang={lang}" + (f"&{query}" if query else ""))
            wait_ready(page)
            page.wait_for_timeout(800)  # let Vega finish drawing
            if whole:
                fit_to_content(page, width, height)
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=whole, animations="disabled")
            print(out)
        browser.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", metavar="DIR", help="every page in both languages into DIR")
    ap.add_argument("--page", default="home", choices=list(PAGES))
    ap.add_argument("--lang", default="en", choices=("en", "ja"))
    ap.add_argument(
        "--whole", action="store_true", help="--page: the whole page, not the first screen"
    )
    ap.add_argument(
        "--query",
        default="",
        help="--page: more URL state, e.g. src=measured-linux-cpu-smollm2-135m",
    )
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshot.png"))
    ap.add_argument(
        "--width",
        type=int,
        default=1400,
        help="viewport width in px (1400: a desktop; 390: a phone)",
    )
    ap.add_argument(
        "--height",
        type=int,
        default=900,
        help="viewport height in px (--all: the least; pages are shot whole)",
    )
    a = ap.parse_args()
    if a.all:
        targets = [
            (path, lang, Path(a.all) / f"{name}-{lang}.png")
            for name, path in PAGES.items()
            for lang in ("en", "ja")
        ]
        shoot(targets, a.width, whole=True, height=a.height)
    else:
        shoot(
            [(PAGES[a.page], a.lang, Path(a.out))],
            a.width,
            whole=a.whole,
            height=a.height,
            query=a.query,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
