"""`scoville show RUN --chart`: the frontier drawn as text, markers where the figures put them."""

from scoville.reporting.terminal import DOMINATED, FRONTIER, THROUGHPUT_PER_ACCELERATOR, frontier_text, run_charts


def rows(*points: tuple[float, float]) -> list[dict]:
    return [{"interactivity": x, "total_throughput_per_accelerator": y} for x, y in points]


def grid(text: str) -> list[str]:
    """The plot rows only (between the title and the x axis), with the y labels cut off."""
    lines = text.splitlines()
    return [line.split("┤", 1)[1] for line in lines[1:] if "┤" in line]


def test_frontier_points_are_filled_dominated_ones_hollow_at_their_place():
    text = frontier_text(rows((10, 1000), (50, 500), (20, 400)), THROUGHPUT_PER_ACCELERATOR, width=70, height=11)
    g = grid(text)
    assert len(g) == 11
    assert sum(line.count(FRONTIER) for line in g) == 2
    assert sum(line.count(DOMINATED) for line in g) == 1
    # the axes end at round values above the data (x 60, y 1,200): (50, 500) sits at 5/6 of the width,
    # 500/1200 of the height
    width = len(g[0])
    row = next(i for i, line in enumerate(g) if FRONTIER in line and line.index(FRONTIER) > width / 2)
    assert abs(g[row].index(FRONTIER) - round(50 / 60 * (width - 1))) <= 1
    assert abs((len(g) - 1 - row) - round(500 / 1200 * (len(g) - 1))) <= 1
    assert "1,200" in text.splitlines()[1] and text.splitlines()[-2].rstrip().endswith(" 60")


def test_a_run_without_figures_says_so_and_per_kw_appears_only_with_a_power_basis():
    assert "no point has both figures" in frontier_text([{"interactivity": None}], THROUGHPUT_PER_ACCELERATOR)
    assert len(run_charts(rows((10, 100), (20, 50)))) == 1
    with_power = [dict(r, total_throughput_per_kw=r["total_throughput_per_accelerator"] / 0.7)
                  for r in rows((10, 100), (20, 50))]
    charts = run_charts(with_power)
    assert len(charts) == 2 and "per kW" in charts[1]


def test_every_line_fits_the_width_asked_for():
    text = frontier_text(rows((1, 10), (300, 90_000), (150, 40_000)), THROUGHPUT_PER_ACCELERATOR, width=80)
    assert max(len(line) for line in text.splitlines()) <= 80
