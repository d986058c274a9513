"""Headless screenshots of the site with Debian's Chromium, against a real `streamlit run` server.

    .venv/bin/python scripts/screenshot.py                 # docs/screenshot.png (home, English)
    .venv/bin/python scripts/screenshot.py --all out/      # every page, both languages
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from playwright.sync_api import sync_playwright  # noqa: E402

from kvsite.server import CHROMIUM, CHROMIUM_ARGS, PAGES, ROOT, streamlit_server, wait_ready  # noqa: E402


def shoot(targets: list[tuple[str, str, Path]], width: int, full_page: bool, height: int = 900) -> None:
    with streamlit_server() as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1)
        for path, lang, out in targets:
            page.goto(f"{base}/{path}?lang={lang}")
            wait_ready(page)
            page.wait_for_timeout(800)  # let Vega finish drawing
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=full_page, animations="disabled")
            print(out)
        browser.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", metavar="DIR", help="every page in both languages into DIR")
    ap.add_argument("--page", default="home", choices=list(PAGES))
    ap.add_argument("--lang", default="en", choices=("en", "ja"))
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshot.png"))
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, help="viewport height (default: 3600 for --all, as Streamlit scrolls inside the page; 900 for --page)")
    a = ap.parse_args()
    if a.all:
        targets = [(path, lang, Path(a.all) / f"{name}-{lang}.png") for name, path in PAGES.items() for lang in ("en", "ja")]
        shoot(targets, a.width, full_page=True, height=a.height or 3600)
    else:
        shoot([(PAGES[a.page], a.lang, Path(a.out))], a.width, full_page=False, height=a.height or 900)
    return 0


if __name__ == "__main__":
    sys.exit(main())
