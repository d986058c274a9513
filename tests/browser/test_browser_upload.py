"""The hosted demo (read-only, unprivileged) in Chromium: a reader uploads the recording their Mac wrote, finds it
in a chapter's source picker (a hostile file after it is refused in one sentence), and nothing is written anywhere
the server could write."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from playwright.sync_api import expect

from harness.server import upload_recording
from tests.app.app_helpers import measured_recording

SERVER_UID = 65534  # the user the hosted_server fixture runs Streamlit as
SHARED_TMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))  # the folders anyone may write to


def _written_by(uid: int, home: Path) -> dict[str, int]:
    """What the server's user owns in the folders the test made for it (its HOME, with its TMPDIR inside), walked
    whole, with each file's mtime (directories by name only: a directory's mtime also moves when a temporary file
    comes and goes inside it); and the entries it owns directly in the shared temporary folders, listed without
    descending (other processes' folders there come and go while the test runs: only the top level is read)."""
    out = {}
    for p in [home, *home.rglob("*")]:
        st = p.lstat()
        if st.st_uid == uid:
            out[str(p)] = 0 if p.is_dir() else st.st_mtime_ns
    for folder in SHARED_TMP:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    out[entry.path] = 0
            except OSError:  # gone since the listing: not the server's (it is idle while we look)
                continue
    return out


def test_an_upload_on_the_read_only_demo_is_shown_in_a_chapter_and_nothing_is_written(
    hosted_server, page, ready, tmp_path
):
    base, folder, home = hosted_server
    data = measured_recording()
    data["provenance"]["machine"]["chip"] = "Apple M9 Browser Test"
    data["label"] = (
        "Apple M9 Browser Test (uploaded)"  # the success message names the file by its own label
    )
    before = sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*"))
    server_files = _written_by(SERVER_UID, home)
    page.goto(f"{base}/Recordings?lang=en")
    ready(page)
    upload_recording(page, "my-mac.yaml", data)
    ready(page)
    expect(page.locator("[data-testid='stAlertContentSuccess']")).to_contain_text(
        "Apple M9 Browser Test", timeout=30_000
    )
    hostile = yaml.safe_dump(data).replace(
        "method:\n",
        "method:\n  l0: &l0 [lol, lol]\n"
        + "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 10)),
    )  # a billion values expanded
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
        files=[
            {"name": "laughs.yaml", "mimeType": "application/x-yaml", "buffer": hostile.encode()}
        ]
    )
    ready(page)
    expect(page.locator("[data-testid='stAlertContentError']")).to_have_text(
        "laughs.yaml: line 5 uses a YAML alias (*l0); a recording never needs one", timeout=30_000
    )
    page.locator("[data-testid='stSidebar']").get_by_text(
        "4 · Decode slowdown"
    ).click()  # same session, another page
    ready(page)
    box = page.get_by_role("combobox", name="Data source", exact=True)
    box.click()
    page.get_by_role("option").filter(has_text="Apple M9 Browser Test").click()
    ready(page)
    expect(page.get_by_text("Apple M9 Browser Test").first).to_be_visible()
    assert page.locator("[data-testid='stException']").count() == 0
    assert sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*")) == before
    assert (
        _written_by(SERVER_UID, home) == server_files
    )  # no file created or changed by the server's user
