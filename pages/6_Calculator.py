"""Calculator — any model's KV cache in any format: the fit verdict, the three levers, a decode what-if."""

import pandas as pd
import streamlit as st

from kvcore import calculator as calc
from kvcore.errors import KvError
from kvcore.formats import FORMATS
from kvcore.formulas import MAX_CONTEXT, MAX_SEQUENCES, WEIGHT_FORMATS, KvSpec
from kvcore.geometry import RUNTIMES, preset_names
from kvcore.units import GIB, fmt_bytes
from kvsite.calc import CUSTOM, LOG_STEPS, available_memory, chip_names, config_geometry
from kvsite.export import chart_block, chart_spec
from kvsite.frame import setup, url_choice

f = setup("calculator")
st.title(f.t("calc.title"))
st.markdown(f.t("calc.lead"))

# ---- the model: a preset (in the URL) or a pasted / uploaded config.json
names = preset_names()
src = url_choice(st.segmented_control, f.t("calc.model_source"), ["preset", "config"], "preset", "msrc",
                 format_func=lambda o: f.t(f"calc.src_{o}"), required=True)
c = st.columns([3, 2])
if src == "config":
    upload = c[0].file_uploader(f.t("calc.upload"), type=["json"], key="upload")
    pasted = c[0].text_area(f.t("calc.paste"), key="pasted", height=140)  # size checked by the engine
    text = upload.getvalue().decode("utf-8", "replace") if upload is not None else pasted
    label = upload.name if upload is not None else "config.json"
    st.caption(f.t("calc.config_url_note"))
else:
    model = c[0].selectbox(f.t("common.model"), names, index=names.index("llama-3.1-8b"), key="model", bind="query-params")
runtime = c[1].selectbox(f.t("calc.runtime"), RUNTIMES, key="rt", bind="query-params", help=f.t("calc.runtime_help"))

# ---- inputs
c = st.columns([2, 2, 1, 1, 1, 1])
st.session_state.setdefault("ctx", 32768)  # no value= below: the log slider's callback also sets it
ctx = c[1].number_input(f.t("calc.ctx_exact"), 1, MAX_CONTEXT, step=1024, key="ctx", bind="query-params")
st.session_state["ctx_log"] = max(s for s in LOG_STEPS if s <= ctx)  # the log slider follows the exact value
c[0].select_slider(f.t("calc.ctx_log"), LOG_STEPS, key="ctx_log", format_func=lambda v: f"{v:,}",
                   on_change=lambda: st.session_state.update(ctx=st.session_state["ctx_log"]))
seqs = c[2].number_input(f.t("calc.sequences"), 1, MAX_SEQUENCES, 1, key="seq", bind="query-params")
k_fmt = c[3].selectbox(f.t("calc.k_format"), list(FORMATS), index=1, key="k", bind="query-params")
v_fmt = c[4].selectbox(f.t("calc.v_format"), list(FORMATS), index=1, key="v", bind="query-params")
w_fmt = c[5].selectbox(f.t("common.weights"), WEIGHT_FORMATS, index=WEIGHT_FORMATS.index("mlx-q4"), key="w", bind="query-params")

c = st.columns([2, 1, 1])
chip = url_choice(c[0].selectbox, f.t("calc.machine"), chip_names(), "M4 Pro", "chip", format_func=lambda n: f.t("calc.custom") if n == CUSTOM else n)
mem = available_memory(f, chip, c[1], c[2])

try:
    if src == "config" and not text.strip():
        st.info(f.t("calc.paste_prompt"))
        st.stop()
    g = config_geometry(text, label, runtime) if src == "config" else config_geometry(None, model, runtime)
    spec = KvSpec(k_fmt, v_fmt)
    result = calc.calculate(g, int(ctx), int(seqs), spec, w_fmt)
except KvError as e:
    st.error(f.t("calc.bad_input", message=str(e)))
    st.stop()

# ---- outputs: numbers, verdict, levers
need = result["weights_bytes"] + result["kv_bytes"]
verdict = calc.verdict(need, mem.bytes)
m = st.columns(4)
for col, label, value in ((m[0], f.t("calc.kv_total"), result["kv_bytes"]), (m[1], f.t("calc.weights_m", w=w_fmt), result["weights_bytes"]),
                          (m[2], f.t("calc.total"), need), (m[3], f.t("calc.available"), mem.bytes)):
    col.metric(label, fmt_bytes(value, decimal=False), help=f"{value:,} bytes = {fmt_bytes(value)}")
st.caption(f.t("calc.per_seq", v=fmt_bytes(result["kv_bytes_per_sequence"])) + " · " + f.t("calc.available") + ": " + mem.reason)
show = {"fits": st.success, "tight": st.warning, "no": st.error}[verdict.status]
show(f.t(f"calc.verdict_{verdict.status}", share=f"{verdict.share:.0%}", need=fmt_bytes(need), available=fmt_bytes(mem.bytes)))
st.caption(f.t("calc.thresholds", fit=f"{calc.FIT_SHARE:.0%}"))
if result["kv_prefill_peak_bytes"] != result["kv_bytes"]:
    st.caption(f.t("calc.prefill_peak", peak=fmt_bytes(result["kv_prefill_peak_bytes"])))
for note in result["notes"]:
    st.caption(f":material/info: {note}")

if verdict.status != "fits":
    st.subheader(f.t("calc.levers_title"))
    weights = result["weights_bytes"]
    t_max = calc.max_context(g, spec, int(seqs), weights, mem.bytes)
    s_max = calc.max_sequences(g, spec, int(ctx), weights, mem.bytes)
    ok_formats = calc.formats_that_fit(g, int(ctx), int(seqs), weights, mem.bytes, spec)
    lv = st.columns(3)
    lv[0].metric(f.t("calc.lever_context"), f"{t_max:,}" if t_max else "—", help=f.t("calc.lever_context_help"))
    lv[1].metric(f.t("calc.lever_sequences"), f"{s_max:,}" if s_max else "—", help=f.t("calc.lever_sequences_help"))
    lv[2].metric(f.t("calc.lever_formats"), ", ".join(ok_formats) if ok_formats else "—", help=f.t("calc.lever_formats_help"))
    if not (t_max or s_max or ok_formats):
        st.caption(f.t("calc.no_lever"))

st.subheader(f.t("calc.formula_title"))
st.code(result["formula"], language=None, wrap_lines=True)
numbers = pd.DataFrame([{"quantity": k, "bytes": result[k]} for k in
                        ("kv_bytes", "kv_bytes_per_sequence", "kv_bytes_per_token", "kv_prefill_peak_bytes", "weights_bytes", "weights_bytes_active")])
st.dataframe(numbers, hide_index=True, key="numbers", column_config={"bytes": st.column_config.NumberColumn(format="%d")})
with st.expander(f.t("calc.layers_title")):
    layers = pd.DataFrame(result["per_layer"])
    st.dataframe(layers.assign(kind=layers["kind"].map(lambda k: f.t(f"growth.kind_{k}"))), hide_index=True, width="stretch")

# ---- chart: memory vs context per format, the available memory as a line
st.subheader(f.t("calc.chart_title"))
contexts = calc.log_contexts(1024, min(MAX_CONTEXT, max(1_048_576, 8 * int(ctx))))
formats = list(dict.fromkeys([k_fmt if k_fmt == v_fmt else "fp16", *calc.CURVE_FORMATS]))
curves = pd.DataFrame(calc.memory_curves(g, contexts, result["weights_bytes"], int(seqs), spec, formats))
lines = pd.DataFrame([{"context": t, "format": f.t("calc.available_line"), "total_bytes": mem.bytes} for t in (contexts[0], contexts[-1])])
data = pd.concat([curves, lines], ignore_index=True).assign(gib=lambda d: d["total_bytes"] / GIB)
chart = chart_spec("series_chart", data, "context", "gib", "format", f.t("common.context"), "GiB", log_x=True, log_y=True,
                   dashed=f.t("calc.available_line"))
chart_block(f, chart, data, "calc_chart", f"kv-calculator-{g.name}")

# ---- decode what-if on a chip
st.subheader(f.t("calc.decode_title"))
speed_chip = chip if chip != CUSTOM else url_choice(st.selectbox, f.t("calc.speed_chip"), chip_names()[1:], "M4 Pro", "schip")
eff = calc.efficiency(f.recs)
rows = calc.predict_decode(g, contexts, spec, w_fmt, speed_chip, eff.share, int(seqs))
st.caption(f.t("calc.eff_fitted", share=f"{eff.share:.0%}", source=eff.source) if eff.source != "assumption"
           else f.t("calc.eff_assumed", share=f"{eff.share:.0%}"))
here = calc.predict_decode(g, [int(ctx)], spec, w_fmt, speed_chip, eff.share, int(seqs))[0]["tokens_per_s"]
st.metric(f.t("calc.decode_at", n=f"{int(ctx):,}", chip=speed_chip), f"{here:,.1f} tok/s")
dec = pd.DataFrame(rows).assign(series=f.t("calc.predicted"))
chart_block(f, chart_spec("series_chart", dec, "context", "tokens_per_s", "series", f.t("common.context"), "tokens/s", log_x=True),
            dec, "calc_decode", f"decode-what-if-{g.name}")
st.caption(f.t("calc.decode_note"))
