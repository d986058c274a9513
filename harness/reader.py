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
        self.bytes_received = 0  # websocket payload bytes, every rerun so far
        self._get(page)
        self.connect()

    def _get(self, path: str) -> None:
        req = urllib.request.Request(f"{self.base}/{path}", headers=self._cookie_header())
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            resp.read()
            self._remember(resp.headers)

    def _cookie_header(self) -> dict:
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}

    def _remember(self, headers) -> None:
        for value in headers.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        if headers.get(REPLICA_HEADER):
            self.replicas.append(headers.get(REPLICA_HEADER).split(",")[-1].strip())

    def connect(self) -> None:
        """Open (or reopen, as the browser does after losing it) the websocket session."""
        self.close()
        self.ws = connect(self.base.replace("http", "ws", 1) + "/_stcore/stream", sock=_socket(self.base, self.nodelay),
                          subprotocols=["streamlit"], max_size=None, additional_headers=self._cookie_header(),
                          open_timeout=self.timeout_s).__enter__()  # as `with connect(...) as ws` (websockets >= 17.1)
        self._remember(self.ws.response.headers)

    def rerun(self, page: str, query: str = "lang=en", trigger: str | None = None) -> float:
        """Seconds from the rerun request to script_finished; PageError if the page showed an exception.
        trigger: a button's widget id (from `elements`), clicked in this rerun. `elements` keeps the run's elements."""
        msg = BackMsg()
        msg.rerun_script.query_string = query
        msg.rerun_script.page_name = page
        if trigger:
            widget = msg.rerun_script.widget_states.widgets.add()
            widget.id, widget.trigger_value = trigger, True
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
                self.elements.append(fwd.delta.new_element)
                failed |= fwd.delta.new_element.WhichOneof("type") == "exception"
            elif kind == "script_finished":
                seconds = time.perf_counter() - t0
                if failed or fwd.script_finished not in (ForwardMsg.FINISHED_SUCCESSFULLY,):
                    raise PageError(f"{page}?{query}: {'exception shown' if failed else fwd.script_finished}")
                return seconds

    def button_id(self, key: str) -> str:
        """The widget id of the button with this key among the last rerun's elements."""
        return next(e.button.id for e in self.elements if e.WhichOneof("type") == "button" and e.button.id.endswith(key))

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
