"""Progress of long jobs: wall-clock time and the time left, in a log or as a bar on a terminal."""

import io

from asrscale.progress import Ticker, clock, eta


def test_durations_read_as_a_person_reads_them():
    assert [clock(s) for s in (4.6, 725, 12_000)] == ["5 s", "12 min 5 s", "3 h 20 min"]
    assert eta(60.0, 1, 4) == "3 min 0 s" and eta(5.0, 0, 4) == "–"


def test_a_ticker_writes_a_line_no_more_often_than_asked_and_always_the_last():
    stream = io.StringIO()
    ticker = Ticker("decodes", 3, every=3600, stream=stream)
    for done in (0, 1, 2, 3):
        ticker(done)
    lines = stream.getvalue().splitlines()
    assert (
        len(lines) == 1 and lines[0].startswith("decodes: 3/3 | ") and lines[0].endswith("left 0 s")
    )


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_ticker_redraws_one_bar():
    stream = Terminal()
    Ticker("features", 2, stream=stream)(2)
    assert stream.getvalue().startswith(
        "\r[" + "#" * 30 + "] features: 2/2"
    ) and stream.getvalue().endswith("\n")
