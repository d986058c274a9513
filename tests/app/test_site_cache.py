"""The site's one cache (kvsite.data.cache.section_cache) keeps st.cache_resource's contract: one shared result per set
of arguments, exceptions not cached, at most max_entries results, st.cache_resource.clear() empties it (every time,
not only the first), and sessions' threads calling at once (one of them clearing) get right results and no error."""

from __future__ import annotations

import threading

import pytest
import streamlit as st

from kvcore.recordings import store as recordings
from kvsite.data import sources
from kvsite.data.cache import section_cache


@pytest.fixture
def counted():
    calls = []

    @section_cache(max_entries=3)
    def square(x, recs=()):
        calls.append(x)
        if x < 0:
            raise ValueError("negative")
        return {"value": x * x}

    return square, calls


def test_one_shared_result_per_set_of_arguments(counted):
    square, calls = counted
    first = square(3)
    assert square(3) is first and calls == [3]  # shared, not a copy
    assert square(3.0) is not first and square(True) is not square(
        1
    )  # 3 and 3.0, 1 and True are other keys
    recs, _ = recordings.load_all()
    assert (
        square(2, recs=recs[:2])
        is square(2, recs=list(recs[:2]))
        is not square(2, recs=tuple(recs[:2]))
    )


def test_exceptions_are_not_cached_and_only_max_entries_are_kept(counted):
    square, calls = counted
    for _ in range(2):
        with pytest.raises(ValueError):
            square(-1)
    assert calls == [-1, -1]
    for x in (1, 2, 3, 1, 4):  # 1 used again before 4 arrives: 2 is the least recently used
        square(x)
    calls.clear()
    square(1), square(3), square(4)
    assert calls == []
    square(2)
    assert calls == [2]


def test_an_argument_it_cannot_key_is_a_type_error(counted):
    square, _ = counted
    with pytest.raises(TypeError, match="dict"):
        square({"x": 1})


def test_st_cache_resource_clear_empties_it_every_time(counted):
    square, calls = counted
    for round_ in range(3):
        square(5)
        assert calls.count(5) == round_ + 1  # computed once per round ...
        square(5)
        assert calls.count(5) == round_ + 1
        st.cache_resource.clear()  # ... and again after every clear


def test_the_site_caches_a_recordings_provenance_in_it():
    recs, _ = recordings.load_all()
    p = sources.badge_fields(recs[0])
    assert sources.badge_fields(recs[0]) is p
    st.cache_resource.clear()
    assert sources.badge_fields(recs[0]) is not p and sources.badge_fields(recs[0]) == p


def test_threads_calling_at_once_while_one_clears_get_right_results(counted):
    square, _ = counted
    out, errors, start = [], [], threading.Barrier(8)

    def session(i):
        try:
            start.wait()
            for n in range(200):
                out.append((n % 3, square(n % 3)))
                if i == 0 and n % 50 == 0:
                    st.cache_resource.clear()
        except Exception as e:  # noqa: BLE001 - any error from a thread fails the test below
            errors.append(e)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(out) == 1600 and all(value == {"value": x * x} for x, value in out)
    assert square(2) is square(2)  # and afterwards one result again
