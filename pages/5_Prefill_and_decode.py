"""Chapter 5 — prefill and decode, one request or many at once: arithmetic intensity and the roofline, your prompt's time
to first token and decode speed, batching; the time model (kvcore.timing.estimate) over measured and published runs."""

import streamlit as st

from kvcore.timing import hardware
from kvsite.charts.chart import show_chart
from kvsite.frame.page import LIVE, setup
from kvsite.inputs import live
from kvsite.inputs.choices import chip_choice, model_choice, weights_choice
from kvsite.layout import row, text
from kvsite.sections import batch as batch_sections
from kvsite.sections import prefill as ps

# Mac data first: the published Apple Silicon batching run (M3 Ultra, four contexts); the bundled Linux CPU run of
# both sweeps stays in the picker, and is where the prefill sweep comes from (no Mac run sweeps the prompt length)
DEFAULT_RUN = "published-mlx-vlm-2153-m3-ultra-batch"
PREFILL_RUN = "measured-linux-cpu-openblas-prefill-batch"
# one chip on the first screen: the default batching run's, with three decode runs measured on it under its roof
DEFAULT_CHIP = "M3 Ultra"

f = setup("prefill_decode")
f.intro()
# the claim's chart first (its controls under it: on a phone six controls would push it off the first screen), the
# number under them; the theory behind both is one click away
claim = st.container()
chips = [c.chip for c in hardware.chips()]
c = row()
chip = chip_choice(c, f, chips, DEFAULT_CHIP)
model = model_choice(c, f)
weights = weights_choice(c, f)
prompt = c.number_input(
    f.t("prefill.prompt"), 1, 1_048_576, 2048, 256, key="prompt", bind="query-params"
)
answer = c.number_input(
    f.t("prefill.answer"), 1, 131_072, 512, 128, key="answer", bind="query-params"
)
seqs = c.number_input(
    f.t("prefill.sequences"),
    1,
    256,
    4,
    1,
    key="seq",
    bind="query-params",
    help=f.t("prefill.sequences_help"),
)
prompt, answer, seqs = int(prompt), int(answer), int(seqs)

roof = ps.roofline(chip, model, weights, prompt, answer, seqs, f.recs, f.lang)
with claim:
    text("##### " + roof["title"])
    show_chart(f, roof["chart"], "roof_chart", "kv-roofline")
ans = ps.your_prompt(chip, model, weights, prompt, answer, seqs, f.lang)
m = row()
for label, value in ans["metrics"]:
    m.metric(label, value)
for warning in (ans["note"], ans["too_big"]):
    if warning:
        st.warning(warning)
with st.expander(f.t("prefill.intensity_title"), icon=":material/functions:"):
    text(roof["text"])
    st.caption(roof["caption"])
    st.markdown(ans["bounds"])
    st.caption(ans["assumptions"])

text("## " + f.t("prefill.batch_title"), f.t("prefill.batch_lead"))
bm = batch_sections.batch_model(chip, model, weights, f.lang)
if bm["chart"] is not None:
    show_chart(f, bm["chart"], "batch_model_chart", f"kv-batch-model-{model}")
st.caption(bm["caption"])
# the run this section and the prefill sweep draw: picked here, beside its chart (on the first screen its chip
# would be a second one)
rec = f.pick_source(
    "batch", default=DEFAULT_RUN, live=True, live_model=True
)  # both sweeps build a model: not on the hosted demo
if rec == LIVE:
    job = live.job_panel(f, "throughput")
    rec = job.recording() if job is not None else None
if rec is not None and (measured := batch_sections.batch_measured(rec, f.lang)) is not None:
    st.subheader(measured["title"])
    show_chart(f, measured["chart"], "batch_measured_chart", f"kv-batch-{rec.id}")
    st.caption(measured["caption"])

with st.expander(f.t("prefill.prefill_title"), icon=":material/speed:"):
    st.markdown(f.t("prefill.prefill_lead"))
    pre = ps.prefill_section(rec, next((r for r in f.recs if r.id == PREFILL_RUN), None), f.lang)
    if pre is None:
        st.info(f.t("prefill.prefill_none"))
    else:  # a run the reader did not pick, and not a Mac's, says what it is
        if pre["elsewhere"]:
            st.caption(
                ":material/warning: " + f.t("prefill.prefill_other", source=pre["elsewhere"])
            )
        show_chart(f, pre["chart"], "prefill_chart", "kv-prefill-vs-prompt")
        st.caption(pre["caption"])
    pptg = ps.pptg_table(f.recs, f.lang)
    if pptg:
        text(
            "### " + f.t("prefill.pptg_title"),
            f.t("prefill.pptg_lead"),
            *(f"**{head}**\n\n{table}" for head, table in pptg),
        )

f.chapter_end()
