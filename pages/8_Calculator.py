"""Calculator — any model's KV cache in any format: the fit verdict, the three levers, a decode what-if.

The widgets are read into one request (kvsite.sections.calc.inputs); the engine answers it with one typed result
(kvcore.capacity, cached by kvsite.sections.calc.compute); each part of the page below draws from the two
(kvsite.sections.calc.outputs)."""

import streamlit as st

from kvcore.errors import KvError
from kvsite.frame.page import setup
from kvsite.layout import lazy_expander
from kvsite.sections.calc import compute as calc_sections
from kvsite.sections.calc import inputs as calc_inputs
from kvsite.sections.calc import outputs as calc_outputs
from kvsite.sections.calc import server as calc_server
from kvsite.sections.log import log_reader

f = setup("calculator")
f.intro()


@st.fragment
def calculator() -> None:
    """Every input and everything it drives: a widget here reruns this, not the frame (navigation,
    language). The context reruns its own part (context_part), which every output below follows."""
    first = (
        st.container()
    )  # the verdict, above the inputs it answers: in the first screen at any width
    draft, left, right = calc_inputs.draft(f)
    if draft is not None:  # None: a GGUF refused (said above)
        context_part(draft, first, left, right)


@st.fragment
def context_part(draft, first, left, right) -> None:
    """The context (its two inputs in their places on the inputs' line) and every output: a context step reruns
    this, not the other inputs. Opening a lazy table or picking the decode what-if's chip reruns only its own
    fragment inside this one."""
    inputs = calc_inputs.request(f, draft)
    if inputs is None:  # nothing to size yet, or the input was refused (said above)
        return
    try:
        result = calc_sections.result(inputs.request)
        plan = calc_sections.plan_table(inputs.request, f.lang)  # what the runtime allocates
    except KvError as e:  # about a pasted config, or the engine's sentence on a preset and format
        calc_inputs.refused(f, e, "preset" if inputs.request.model.is_preset else "file")
        return
    with first:
        calc_outputs.verdict(f, inputs, result, plan)
    with left:  # the numbers the verdict counts
        calc_outputs.numbers(f, inputs, result)
    with right:  # the chart that shows them
        settings = calc_outputs.chart(f, inputs, result)
    calc_outputs.notes(f, inputs, result, plan)
    calc_outputs.levers(f, result, plan)
    calc_outputs.formula(f, inputs, result)
    calc_outputs.lazy_tables(f, inputs)
    what_if = lazy_expander(  # a link that names its chip (?schip=) opens it: the view it shares
        f.t("calc.decode_title"),
        "whatif_open",
        icon=":material/speed:",
        expanded="schip" in st.query_params,
    )
    if what_if:  # another question, drawn while it is open
        with what_if:
            calc_outputs.decode_what_if(f, inputs, result, settings)
    calc_server.as_server(f, inputs)  # your model as a server: users and turns (open: computed)


calculator()
with st.expander(f.t("logread.title"), icon=":material/receipt_long:"):  # your own log, read back
    log_reader(f, heading=False)

f.chapter_end()
