"""deploy/nginx-kvsite.conf as shipped (only its ports changed) in front of two read-only replicas on loopback:
every reader is served, both replicas are used, each reader's requests stay on one replica, and a replica
stopped mid-test costs its readers one reconnect and nothing else."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from harness.reader import PageError, Reader
from harness.server import NGINX, nginx_server, streamlit_server

REPLICA_ENV = {
    "KVCORE_READ_ONLY": "1",
    "STREAMLIT_SERVER_COOKIE_SECRET": "one-secret-for-every-replica",
}
# what readers do: every page, with URL state a reader can share
VISITS = [
    ("", "lang=ja"),
    ("Mechanism", "lang=en&prompt=512&new=100"),
    ("Nbytes_trap", "lang=ja&tokens=300&fmt=mlx-q4"),
    ("Linear_growth", "lang=en&model=llama-3.1-8b&ctx=131072"),
    ("Decode_slowdown", "lang=ja&chip=M4+Max+%2840-core+GPU%29"),
    ("Savings", "lang=en&mem=64"),
    ("Calculator", "lang=ja&ctx=65536"),
    ("Recordings", "lang=en"),
]


class Session(threading.Thread):
    """One reader visiting pages in turn; a lost connection is reopened as the browser does, and counted."""

    def __init__(self, base: str, start: int, visits: int):
        super().__init__(daemon=True)
        self.reader = Reader(base)
        self.start_at, self.visits = start, visits
        self.done, self.reconnects, self.errors = 0, 0, []

    def run(self):
        try:
            while self.done < self.visits:
                page, query = VISITS[(self.start_at + self.done) % len(VISITS)]
                try:
                    self.reader.rerun(page, query)
                    self.done += 1
                except (ConnectionClosed, OSError):
                    self.reconnects += 1
                    self.reader.connect()
        except (PageError, ConnectionClosed, OSError, TimeoutError) as e:
            self.errors.append(repr(e))
        finally:
            self.reader.close()


def test_two_replicas_behind_nginx_keep_every_reader_and_survive_one_stopping(tmp_path):
    with streamlit_server(env=REPLICA_ENV) as a, streamlit_server(env=REPLICA_ENV) as b:
        ports = [int(a.rsplit(":", 1)[1]), int(b.rsplit(":", 1)[1])]
        if not Path(NGINX).exists():
            pytest.fail("Debian's nginx is not installed (scripts/test.sh installs it with apt)")
        with nginx_server(tmp_path, ports) as base:
            readers = [Session(base, i, visits=2 * len(VISITS)) for i in range(16)]
            first = [r.reader.replicas[0] for r in readers]
            assert {r.reader.replicas[0] for r in readers} == {
                f"127.0.0.1:{p}" for p in ports
            }  # both used
            for r in readers:  # the page request and its websocket: one replica
                assert len(r.reader.replicas) == 2 and len(set(r.reader.replicas)) == 1, (
                    r.reader.replicas
                )
            stopped = f"127.0.0.1:{ports[0]}"
            on_stopped = [r for r, was in zip(readers, first) if was == stopped]
            for r in readers:
                r.start()
            # the stop waits for the stopped replica's own readers (served in turn, they keep pace with each other),
            # not for all of them: waiting for the slowest reader on the other replica let a busy replica's
            # readers finish every visit first, and none was mid-visit when it stopped
            while min(r.done for r in on_stopped) < 3 and all(r.is_alive() for r in readers):
                time.sleep(0.05)
            os.kill(
                a.pid, signal.SIGTERM
            )  # mid-test: its readers are between their 3rd and last visit
            for r in readers:
                r.join(120)
            assert [r.errors for r in readers] == [[]] * len(readers)
            assert [r.done for r in readers] == [2 * len(VISITS)] * len(
                readers
            )  # every reader served
            moved = 0
            for r, was in zip(readers, first):
                if was == stopped and r.reconnects:  # one reconnect, then the other replica
                    assert (
                        r.reconnects == 1
                        and r.reader.replicas[2:]
                        and set(r.reader.replicas[2:]) == {f"127.0.0.1:{ports[1]}"}
                    )
                    moved += 1
                elif (
                    was == stopped
                ):  # on a loaded machine a reader may finish all its visits before the stop
                    assert set(r.reader.replicas) == {was}
                else:  # nothing happened to them: no reconnect, still on their replica
                    assert r.reconnects == 0 and set(r.reader.replicas) == {was}
            assert moved >= 1  # the stop did reach readers mid-visit
            # a reader arriving now is served by the replica left
            with Reader(base) as late:
                late.rerun("Nbytes_trap", "lang=en")
                assert set(late.replicas) == {f"127.0.0.1:{ports[1]}"}
