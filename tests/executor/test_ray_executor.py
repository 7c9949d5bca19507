"""The executor interface on Ray tasks: same results, same errors, as the local pool."""

from __future__ import annotations

import pytest

from scoville.executor import LocalExecutor, RayExecutor, TaskError, TaskUserError, make_executor
from scoville.load import parse_int_list

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_exec(ray_cluster):
    ex = make_executor("ray")
    assert isinstance(ex, RayExecutor)
    yield ex
    ex.close()  # joined the test session's cluster: must not shut it down
    assert ray_cluster.is_initialized()


def test_map_matches_the_local_pool(ray_exec):
    items = ["1-64", "3,5,7", "2-2", "9"]
    with LocalExecutor(max_workers=2) as local:
        assert ray_exec.map(parse_int_list, items) == local.map(parse_int_list, items)
    assert ray_exec.map(abs, range(-3, 3)) == [3, 2, 1, 0, 1, 2]  # builtins work as tasks too


def test_errors_come_back_naming_the_item(ray_exec):
    with pytest.raises(TaskError) as e:
        ray_exec.map(int, ["1", "oops"])
    assert e.value.index == 1 and "'oops'" in str(e.value) and isinstance(e.value.cause, ValueError)
    with pytest.raises(TaskUserError, match="positive integers"):
        ray_exec.map(parse_int_list, ["0"])


def test_submit_streams_each_result_once(ray_exec):
    results = list(ray_exec.submit(int, ["4", "x", "6"]))
    assert sorted(r.index for r in results) == [0, 1, 2]
    assert {r.index: r.value for r in results if r.ok} == {0: 4, 2: 6}
    assert ray_exec.describe()["cluster_cpus"] == 2.0
