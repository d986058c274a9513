"""A reader's session as a browser opens it, without the browser: the page's HTTP request (which carries a
proxy's cookies), then Streamlit's websocket (`/_stcore/stream`): a BackMsg rerun_script with the page and
its URL query, ForwardMsgs back until script_finished. For the deployment test and the load benchmark.

Example:
    with Reader("http://127.0.0.1:8501") as r:
        seconds = r.rerun("Nbytes_trap", "lang=ja&tokens=300")
"""

from __future__ import annotations

import socket
import time
import urllib.request

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.sync.client import connect

REPLICA_HEADER = "X-Kvsite-Replica"  # deploy/nginx-kvsite.conf names the replica that answered


class PageError(RuntimeError):
    """A rerun that showed an exception or did not finish successfully."""


def _socket(base: str, nodelay: bool = True) -> socket.socket:
    """A connection with Nagle's algorithm off, as browsers open theirs."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    if nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Reader:
    """One reader: cookies from the first page request, one websocket session (reopened by reconnect())."""

    def __init__(self, base: str, page: str = "", timeout_s: float = 60, nodelay: bool = True):
        self.base, self.timeout_s, self.nodelay = base, timeout_s, nodelay
        self.cookies: dict[str, str] = {}
        self.replicas: list[str] = []  # the replica of every request, in order (through nginx)
        self.ws = None
        self.elements: list = []  # the last rerun's elements (Streamlit's Element protos)
        self.fragment_of: dict[
            str, str
        ] = {}  # widget id -> the id of the fragment (st.fragment) it was drawn in
        self.bytes_received = 0  # websocket payload bytes, every rerun so far
        self._get(page)
        self.connect()

    def _get(self, path: str) -> None:
        req = urllib.request.Request(f"{self.base}/{path}", headers=self._cookie_header())
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            resp.read()
            self._remember(resp.headers)

    def _cookie_header(self) -> dict:
        return (
            {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
            if self.cookies
            else {}
        )

    def _remember(self, headers) -> None:
        for value in headers.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        if headers.get(REPLICA_HEADER):
            self.replicas.append(headers.get(REPLICA_HEADER).split(",")[-1].strip())

    def connect(self) -> None:
        """Open (or reopen, as the browser does after losing it) the websocket session."""
        self.close()
        self.ws = connect(
            self.base.replace("http", "ws", 1) + "/_stcore/stream",
            sock=_socket(self.base, self.nodelay),
            subprotocols=["streamlit"],
            max_size=None,
            additional_headers=self._cookie_header(),
            open_timeout=self.timeout_s,
        ).__enter__()  # as `with connect(...) as ws` (websockets >= 17.1)
        self._remember(self.ws.response.headers)

    def rerun(
        self,
        page: str,
        query: str = "lang=en",
        trigger: str | None = None,
        slider: tuple[str, float] | None = None,
    ) -> float:
        """Seconds from the rerun request to script_finished; PageError if the page showed an exception.
        trigger: a button's widget id (from `elements`), clicked in this rerun. slider: (widget id, new value: a
        number, or a select_slider's option label), set
        as a browser sends a slider step: a rerun of the fragment the slider is in when it is in one (then
        `elements` holds that fragment's elements only). `elements` keeps the run's elements."""
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_name = page
        if trigger:
            widget = msg.rerun_script.widget_states.widgets.add()
            widget.id, widget.trigger_value = trigger, True
        if slider:
            widget = msg.rerun_script.widget_states.widgets.add()
            widget.id = slider[0]
            if isinstance(slider[1], str):  # a select_slider: the option's label
                widget.string_array_value.data.append(slider[1])
            else:
                widget.double_array_value.data.append(slider[1])
            if self.fragment_of.get(slider[0]):
                msg.rerun_script.fragment_id = self.fragment_of[slider[0]]
        self.elements = []
        t0 = time.perf_counter()
        self.ws.send(msg.SerializeToString())
        failed = False
        while True:
            raw = self.ws.recv(timeout=self.timeout_s)
            self.bytes_received += len(raw)
            fwd = ForwardMsg.FromString(raw)
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                self.elements.append(element)
                failed |= element.WhichOneof("type") == "exception"
                widget = getattr(element, element.WhichOneof("type") or "", None)
                if getattr(widget, "id", "") and isinstance(widget.id, str):
                    self.fragment_of[widget.id] = fwd.delta.fragment_id
            elif kind == "script_finished":
                seconds = time.perf_counter() - t0
                if failed or fwd.script_finished not in (
                    ForwardMsg.FINISHED_SUCCESSFULLY,
                    ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,
                ):
                    raise PageError(
                        f"{page}?{query}: {'exception shown' if failed else fwd.script_finished}"
                    )
                return seconds

    def send(self, page: str, query: str, widgets: list, fragment_id: str = "") -> list:
        """A rerun with these widget states (WidgetState protos, as a browser or a hostile client sends them), of
        the fragment `fragment_id` if given: the elements it drew, an exception's included (never raised)."""
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_name = page
        msg.rerun_script.widget_states.widgets.extend(widgets)
        msg.rerun_script.fragment_id = fragment_id
        self.ws.send(msg.SerializeToString())
        elements = []
        while True:
            fwd = ForwardMsg.FromString(self.ws.recv(timeout=self.timeout_s))
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                elements.append(fwd.delta.new_element)
            elif kind == "script_finished":
                return elements

    def slider(self, key: str) -> tuple[str, float, float, float, list[str]]:
        """(widget id, value, step, max, options) of the slider with this key among the last rerun's elements; a
        select_slider's value is its option's index, and a rerun sets it by the option's label (options[index])."""
        el = next(
            e.slider
            for e in self.elements
            if e.WhichOneof("type") == "slider" and e.slider.id.endswith(key)
        )
        return (
            el.id,
            (list(el.value) or list(el.default))[0],
            el.step or 1,
            el.max,
            list(el.options),
        )

    def button_id(self, key: str) -> str:
        """The widget id of the button with this key among the last rerun's elements."""
        return next(
            e.button.id
            for e in self.elements
            if e.WhichOneof("type") == "button" and e.button.id.endswith(key)
        )

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
