"""A power meter's CSV file: any damage is one line naming the file, never a traceback."""

import pytest

from scoville.power.csv_meter import read_power_csv
from scoville.power.sources import PowerError


@pytest.mark.parametrize("content, words", [
    (b"t,watts\n1," + b"7" * 200_000 + b"\n", "not a CSV file scoville can read"),  # over csv's field limit
    (b"t,watts\n1,\x00\n", "must be numbers"),
    (b"\xff\xfet,watts\n", "not a UTF-8 text CSV file"),
    (b"time,power\n1,2\n", "needs columns t"),
    (b"t,watts\n", "no samples"),
    (b"t,watts\n1,nan\n", "finite"),
])
def test_damaged_meter_files_are_one_line_errors(tmp_path, content, words):
    path = tmp_path / "meter.csv"
    path.write_bytes(content)
    with pytest.raises(PowerError) as e:
        read_power_csv(path, [])
    assert words in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


def test_a_good_meter_file_reads_on_the_run_clock(tmp_path):
    path = tmp_path / "meter.csv"
    path.write_text("t,watts,device\n0.5,700,psu0\n1.5,710.5,psu0\n")
    table = read_power_csv(path, [])
    assert table.to_pylist() == [{"t": 0.5, "device": "psu0", "watts": 700.0},
                                 {"t": 1.5, "device": "psu0", "watts": 710.5}]
