"""A caption says what its chart shows in the state the reader put it in: the axes Linear growth draws (and why a
windowed model's line bends), the run the Mechanism chart holds, and (tests/app/test_app_live.py) the trap's numbers
after a live probe on the real caches."""

from __future__ import annotations

import pytest
from app_helpers import page

from kvsite import i18n

GROWTH = "pages/3_Linear_growth.py"
MECHANISM = "pages/1_Mechanism.py"
CPU_RUN = "measured-linux-cpu-smollm2-135m"


def captions(at) -> str:
    return "\n".join(str(c.value) for c in at.caption)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_linear_growths_caption_names_the_axes_the_chart_draws(rec_dir, lang):
    t = i18n.translator(lang, "growth.")
    at = page(GROWTH, lang)
    assert not at.exception
    assert at.toggle(key="log").value is False
    assert t("axes_linear") in captions(at) and t("axes_log") not in captions(at)
    at.toggle(key="log").set_value(True).run()
    assert t("axes_log") in captions(at) and t("axes_linear") not in captions(at)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_sliding_window_models_bend_is_explained_on_log_axes(rec_dir, lang):
    at = page(GROWTH, lang, model="gemma-3-4b", log="true")
    assert not at.exception
    words = captions(at)
    assert "gemma-3-4b" in words and "1,024" in words and "29" in words
    assert i18n.translator(lang, "growth.")("axes_log") in words
    at = page(GROWTH, lang, model="llama-3.2-1b", log="true")
    assert "1,024" not in captions(at)  # every layer grows: nothing bends


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_mechanism_caption_describes_the_run_picked(rec_dir, lang):
    def note(at) -> str:  # the caption under the measured bars
        live = i18n.translate(lang, "mechanism.measured_live")
        [text] = [str(c.value) for c in at.caption if live in str(c.value)]
        return text

    at = page(MECHANISM, lang)
    assert not at.exception
    assert i18n.translate(lang, "mechanism.measured_note") in note(at)  # the default: the T4 point
    at = page(MECHANISM, lang, src=CPU_RUN)
    assert not at.exception
    assert "T4" not in note(at) and "SmolLM2-135M" in note(at) and " 32 " in note(at)
