"""Mac data first: no chapter opens on a run measured on a Linux CPU when a published or measured Apple Silicon
run exists for it; the Linux runs stay in the picker, labelled; a chart of measured runs compares like with like."""

from __future__ import annotations

import pytest
from app_helpers import PAGES, charts, page

from kvcore.recordings.provenance import source_class
from kvsite.data.sources import load_recordings, source_label

NO_PICKER = {
    "pages/6_Savings.py",
    "pages/8_Calculator.py",
}  # their first screen computes, from presets


def _classes() -> dict[str, str]:
    recs, _, _ = load_recordings()
    return {r.id: source_class(r) for r in recs}


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("path", PAGES)
def test_no_chapter_opens_on_a_linux_run_when_a_mac_run_is_there(rec_dir, path, lang):
    recs, _, _ = load_recordings()
    classes = _classes()
    names = {source_label(r, lang, short=True): r.id for r in recs}  # the picker's labels -> ids
    names |= {source_label(r, lang): r.id for r in recs}
    at = page(path, lang)
    boxes = [b for b in at.selectbox if b.key in ("src__w", "rec__w")]
    assert boxes or path in NO_PICKER, path
    for box in boxes:
        runs = [names[o] for o in box.options if o in names]
        assert runs, (path, box.options)
        if any(classes[i] != "other" for i in runs):  # a published or Apple Silicon run is offered
            assert classes.get(box.value) != "other", (path, box.value)


def test_the_prefill_chapter_opens_on_the_published_m3_ultra_run(rec_dir):
    at = page("pages/5_Prefill_and_decode.py", "en")
    assert at.selectbox(key="src__w").value == "published-mlx-vlm-2153-m3-ultra-batch"
    assert any("AMD EPYC" in o for o in at.selectbox(key="src__w").options)  # still pickable
    # the prompt-length sweep exists only on a Linux CPU: one click away, said so
    prefill = next(e for e in at.expander if e.label == "Prompt processing: the O(T²) term")
    assert any("Linux CPU" in c.value for c in prefill.caption)


def test_the_recordings_page_opens_on_article_a(rec_dir):
    at = page("pages/9_Recordings.py", "en")
    assert at.selectbox(key="rec__w").value == "published-article-a-m5-pro"


def test_the_mechanisms_measured_chart_holds_one_run_named_by_machine_and_model(rec_dir):
    at = page("pages/1_Mechanism.py", "en")
    measured = [c for c in charts(at) if "seconds" in c["data"].columns]
    assert len(measured) == 1
    data = measured[0]["data"]
    assert data["recording"].nunique() == 1 and len(data) == 2
    assert "NVIDIA T4 · SmolLM2-1.7B" in data["run"].iloc[0]
