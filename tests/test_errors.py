"""Engine refusals a reader can cause carry a code; the site says each in Japanese from it."""

import re

import pytest

from kvcore.errors import CODES, KvError
from kvcore.measure.caches import guard
from kvcore.memory import allocsim
from kvcore.memory.formats import FORMATS
from kvsite import i18n

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def test_every_code_has_a_japanese_sentence_and_english_stays_at_the_raise_site():
    ja = {k.removeprefix("errors.") for k in i18n.texts("ja") if k.startswith("errors.")}
    assert ja == set(CODES)
    assert not any(k.startswith("errors.") for k in i18n.texts("en"))


def test_an_unknown_code_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown KvError code"):
        KvError("x", "no_such_code")


@pytest.mark.parametrize(
    "cause,code,quoted",
    [
        (lambda: allocsim.parse_updates("300, abc"), "updates_bad", "300, abc"),
        (lambda: allocsim.parse_updates("1x5000"), "updates_many", "4,096"),
        (lambda: allocsim.parse_updates(" , "), "updates_none", "1, 256"),
        (lambda: FORMATS["mlx-q4"].row_bytes(48), "format_group", "48"),
        (
            lambda: guard(10**9, 10**4, 32768, available=15 * 10**8, model="m"),
            "guard_decode_fits",
            "m の 32,768",
        ),
        (
            lambda: guard(10**9, 10**6, 32768, available=10**9, model="m"),
            "guard_decode_none",
            "32,768",
        ),
        (
            lambda: guard(0, 10**4, 65536, available=10**9, task="growth"),
            "guard_growth_fits",
            "65,536",
        ),
        (
            lambda: guard(0, 10**9, 32768, available=10**9, task="growth"),
            "guard_growth_none",
            "32,768",
        ),
    ],
)
def test_a_refusal_is_said_in_japanese_with_the_same_values(cause, code, quoted):
    with pytest.raises(KvError) as info:
        cause()
    e = info.value
    assert e.code == code
    ja, en = i18n.error_text("ja", e), i18n.error_text("en", e)
    assert en == str(e) and JAPANESE.search(ja) and not JAPANESE.search(en)
    assert quoted in ja and "⟨" not in ja, ja
