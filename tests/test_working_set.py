"""The Mac's GPU working set by RAM and macOS (kvcore.timing.working_set): every row is a line a real Mac printed,
with its public thread; a RAM size no row measures is an estimate, said as one; `calc --ram` names the macOS."""

import re
import subprocess
import sys

import pytest

from kvcore.capacity.memory_fit import gpu_limit
from kvcore.errors import KvError
from kvcore.timing.working_set import UNITS, reports, rule_share, working_set
from kvcore.units import GIB


@pytest.mark.parametrize("row", reports(), ids=lambda r: f"{r.ram_gb}GB-macOS{r.macos}")
def test_every_row_is_the_number_its_line_prints_with_a_public_thread(row):
    printed = {float(n.replace(",", ".")) for n in re.findall(r"\d+[.,]\d+", row.line)}
    assert row.value in printed  # the line verbatim holds the figure the row uses
    assert row.unit in UNITS and row.url.startswith("https://github.com/")
    assert row.macos in ("15", "26", None) and row.machine


def test_24_and_32_gb_are_two_thirds_not_three_quarters():
    assert f"{working_set(24).bytes / GIB:.2f}" == "16.00"
    assert f"{working_set(32).bytes / GIB:.2f}" == "21.33"
    assert working_set(24).how == working_set(32).how == "measured"
    assert gpu_limit(32).bytes == working_set(32).bytes  # the verdict's limit is the table's


def test_macos_26_gives_more_at_128_gb_and_takes_the_older_figure_where_unreported():
    new, old = working_set(128, "26"), working_set(128, "15")
    assert (new.how, f"{new.bytes / GIB:.2f}") == ("measured", "107.52")
    assert (old.how, old.bytes / GIB) == ("rule", 96)  # no citable 128 GB log before macOS 26
    sixteen = working_set(16, "26")
    assert sixteen.how == "older_macos" and sixteen.report.macos == "15"
    assert f"{sixteen.bytes / GIB:.2f}" == "10.67"


def test_the_rule_for_unmeasured_sizes_is_the_measured_older_rows_rule():
    """The estimate is held to the data: the rule reproduces every macOS 15 row within 0.01 GiB."""
    for r in reports():
        if r.macos == "15":
            assert abs(r.ram_gb * rule_share(r.ram_gb) - r.bytes / GIB) < 0.01, r.ram_gb
    assert working_set(48).how == "rule" and working_set(48).report is None


def test_a_macos_version_is_read_as_the_table_names_it_and_an_unknown_one_refused_by_name():
    """A reader types the version they run: 14 or 13.6 is "15 or earlier", 26.3 is 26; macOS went from 15 to 26,
    so 20 is no version, and neither is text."""
    assert working_set(16, "14").macos == working_set(16, "13.6").macos == "15"
    assert working_set(128, "26.3").bytes == working_set(128, "26").bytes
    for wrong in ("20", "sequoia", "9", "15.x", "1" * 40):
        with pytest.raises(KvError) as refused:
            working_set(16, wrong)
        assert refused.value.code == "macos_version" and wrong[:8] in str(refused.value)


def test_calc_ram_names_the_macos_it_assumes():
    def run(*extra):
        cmd = [
            sys.executable,
            "-m",
            "kvcore",
            "calc",
            "--model",
            "llama-3.2-1b",
            "--context",
            "4096",
        ]
        cmd += ["--ram", "128"]
        out = subprocess.run([*cmd, *extra], capture_output=True, text=True, check=True).stdout
        return next(line for line in out.splitlines() if line.startswith("GPU limit"))

    assert "macOS 15 or earlier" in run() and "96.00 GiB" in run()
    assert "macOS 26" in run("--macos", "26") and "107.52 GiB" in run("--macos", "26")
    assert "96.00 GiB" in run("--macos", "14")
