"""The executor interface on this machine's process pool (no Ray needed)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from scoville.errors import UserError
from scoville.executor import LocalExecutor, RayUnavailableError, TaskError, TaskUserError, make_executor
from scoville.executor.ray_executor import check_reachable
from scoville.load import parse_int_list


@pytest.fixture
def pool(local_pool):
    return local_pool   # the session's pool (conftest.py), shared with test_distributed_sim


def test_map_is_ordered_and_runs_in_the_pool(pool):
    assert pool.map(abs, range(-6, 6)) == [abs(i) for i in range(-6, 6)]
    assert pool.map(parse_int_list, ["1-8", "3,5"]) == [[1, 2, 4, 8], [3, 5]]


def test_a_failure_names_its_item(pool):
    with pytest.raises(TaskError) as e:
        pool.map(int, ["1", "2", "bad-value"])
    assert e.value.index == 2 and "bad-value" in str(e.value) and isinstance(e.value.cause, ValueError)
    assert not isinstance(e.value, UserError)


def test_a_user_error_in_a_task_stays_a_user_error(pool):
    with pytest.raises(TaskUserError, match=r"item 1 \('0'\).*positive integers"):
        pool.map(parse_int_list, ["2", "0"])


def test_submit_streams_every_result_including_failures(pool):
    results = list(pool.submit(int, ["1", "x", "3"]))
    assert sorted(r.index for r in results) == [0, 1, 2]
    by_index = {r.index: r for r in results}
    assert by_index[0].value == 1 and by_index[2].value == 3
    assert not by_index[1].ok and "'x'" in str(by_index[1].error)


def test_one_worker_runs_inline_with_the_same_results():
    with LocalExecutor(max_workers=1) as ex:
        assert ex.map(abs, [-1, -2]) == [1, 2]
        with pytest.raises(TaskError, match="item 0"):
            ex.map(int, ["nope"])


def test_make_executor_validates_the_flags():
    assert isinstance(make_executor("local"), LocalExecutor)
    with pytest.raises(UserError, match="unknown --executor 'spark'"):
        make_executor("spark")
    with pytest.raises(UserError, match="--ray-address only applies"):
        make_executor("local", "10.0.0.1:6379")
    with pytest.raises(UserError, match="--workers must be >= 1"):
        LocalExecutor(0)


@pytest.mark.slow   # a fresh interpreter, so that nothing imported earlier hides an import
def test_importing_the_executor_never_imports_ray():
    code = ("import sys, scoville.executor, scoville.client.ray_pool; "
            "ex = scoville.executor.make_executor('ray'); print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_address_with_no_cluster_fails_in_seconds_with_a_hint():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    with pytest.raises(RayUnavailableError, match=f"no Ray cluster answers at 127.0.0.1:{port}.*ray start --head"):
        check_reachable(f"127.0.0.1:{port}")
    with pytest.raises(RayUnavailableError, match="not HOST:PORT"):
        check_reachable("head-node:abc")
    check_reachable("auto")  # left to Ray's own discovery


@pytest.mark.slow   # a fresh interpreter in which Ray cannot be imported
def test_without_ray_installed_the_error_says_how_to_install_it():
    code = ("import sys; sys.modules['ray'] = None\n"
            "from scoville.executor import make_executor\n"
            "try:\n    make_executor('ray').map(abs, [1])\n"
            "except Exception as e:\n    print(type(e).__name__, e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("RayUnavailableError --executor ray needs Ray, which is not installed: "
                                  "pip install 'scoville[ray]'")


def test_a_crashed_worker_fails_its_items_and_the_executor_stays_usable():
    import os

    with LocalExecutor(max_workers=2) as ex:
        with pytest.raises(TaskError, match="BrokenProcessPool"):
            ex.map(os._exit, [3, 3])          # the worker process dies mid-task
        assert ex.map(abs, [-1, -2, -3]) == [1, 2, 3]   # a fresh pool, not the broken one


def test_a_bracketed_ipv6_address_with_a_listener_is_reachable():
    try:
        server = socket.socket(socket.AF_INET6)
        server.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with server:
        server.listen()
        check_reachable(f"[::1]:{server.getsockname()[1]}")   # no error: something answers there
