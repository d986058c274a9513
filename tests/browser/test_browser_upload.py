"""The hosted demo (read-only, unprivileged) in Chromium: a reader uploads the recording their Mac wrote, finds it
in a chapter's source picker, and nothing is written anywhere the server could write."""

from __future__ import annotations

from pathlib import Path

import yaml
from playwright.sync_api import expect

from tests.app.app_helpers import measured_recording


def _written_by(uid: int, *folders: Path) -> dict[str, int]:
    """Every path under the folders owned by `uid` (the server's user), with its mtime for files; directories by
    name only (a directory's mtime also moves when a temporary file comes and goes inside it)."""
    out = {}
    for folder in folders:
        for p in folder.rglob("*"):
            try:
                st = p.lstat()
            except OSError:
                continue
            if st.st_uid == uid:
                out[str(p)] = 0 if p.is_dir() else st.st_mtime_ns
    return out


def test_an_upload_on_the_read_only_demo_is_shown_in_a_chapter_and_nothing_is_written(hosted_server, page, ready, tmp_path):
    base, folder, home = hosted_server
    data = measured_recording()
    data["provenance"]["machine"]["chip"] = "Apple M9 Browser Test"
    before = sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*"))
    server_files = _written_by(65534, home, Path("/tmp"))
    page.goto(f"{base}/Recordings?lang=en")
    ready(page)
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
        files=[{"name": "my-mac.yaml", "mimeType": "application/x-yaml", "buffer": yaml.safe_dump(data).encode()}])
    ready(page)
    expect(page.locator("[data-testid='stAlertContentSuccess']")).to_contain_text("Apple M9 Browser Test", timeout=30_000)
    page.locator("[data-testid='stSidebar']").get_by_text("4 · Decode slowdown").click()  # same session, another page
    ready(page)
    box = page.get_by_role("combobox", name="Data source", exact=True)
    box.click()
    page.get_by_role("option").filter(has_text="Apple M9 Browser Test").click()
    ready(page)
    expect(page.get_by_text("Apple M9 Browser Test").first).to_be_visible()
    assert page.locator("[data-testid='stException']").count() == 0
    assert sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*")) == before
    assert _written_by(65534, home, Path("/tmp")) == server_files  # no file created or changed by the server's user
