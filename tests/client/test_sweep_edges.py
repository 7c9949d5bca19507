"""A sweep when things go wrong or are rerun: a server that dies, all-failed points, cached prompts,
the server's context window, resumed attempts. In process, against real loopback servers."""

from __future__ import annotations

import json

import pytest
from client_support import Behaviour, FakeServer, Served

from scoville.client.config import ClientConfig
from scoville.client.errors import ClientError
from scoville.client.sweep import (
    Sweep,
    SweepInterrupted,
    SweepStopped,
    resume_sweep,
    run_sweep,
)
from scoville.errors import UserError
from scoville.load import concurrency_sweep
from scoville.power.sources import plan_power, system_info
from scoville.results.store import measured_points, read_manifest, read_requests
from scoville.workload.prompts import prompt_token_ids
from scoville.workload.scenarios import resolve_workload
from scoville.workload.synthetic import SyntheticWorkload

WL = SyntheticWorkload(isl=24, osl=4, range_ratio=1.0, seed=2, name="tiny")


def make_sweep(base_url: str, points, workload=WL, **kw) -> Sweep:
    plan = plan_power("rated", hardware="h200", accelerators=1)
    return Sweep(cfg=ClientConfig(base_url=base_url, model="test-model", **kw.pop("cfg", {})), workload=workload,
                 points=points, power=plan, system=system_info("h200", 1, plan, None), workers=1, **kw)


class StopAfterFirstPoint:
    """An observer that takes the server down when the first point ends (the server dies between points)."""

    def __init__(self, served: Served) -> None:
        self.served, self.warnings = served, []

    def start_point(self, point, position, total):
        pass

    def record(self, rec):
        pass

    def end_point(self, point, row):
        self.served.stop()

    def warn(self, message):
        self.warnings.append(message)


def test_a_dead_server_stops_the_sweep_in_one_line_and_resume_redoes_the_rest(served, tmp_path):
    served.server.set(Behaviour())
    points = concurrency_sweep([1, 2, 3], num_requests=3, warmup_requests=0)
    with pytest.raises(SweepStopped) as e:
        run_sweep(make_sweep(served.server.base_url, points), tmp_path, observer=StopAfterFirstPoint(served))
    message = str(e.value)
    assert "\n" not in message and "every request of point c=2 failed to connect" in message
    assert "resume with: scoville sweep --resume" in message
    run = e.value.result.run_dir
    m = json.loads((run / "manifest.json").read_text())  # the file as written
    assert m["status"] == "interrupted"  # not "complete": point c=3 was never tried
    assert m["point_results"]["1"]["ok"] == 0 and m["point_results"]["1"]["errors"] == {"connect": 3}
    assert "2" not in m["point_results"] and measured_points(run) == {0}

    again = Served(FakeServer())
    try:
        again.server.set(Behaviour())
        result = resume_sweep(run, base_url=again.server.base_url)
    finally:
        again.stop()
    assert result.status == "complete" and [o.point for o in result.outcomes] == [1, 2]
    assert [r["num_ok"] for r in result.rows] == [3, 3, 3]


def test_a_point_whose_every_request_failed_is_reported_and_measured_again_on_resume(server, tmp_path):
    server.behave = lambda i, body: Behaviour(status=400, error_body="prompt too long") if body["max_tokens"] == 4 \
        else Behaviour()
    points = concurrency_sweep([1, 2], num_requests=2, warmup_requests=0)
    result = run_sweep(make_sweep(server.base_url, points), tmp_path)
    assert result.status == "complete"
    first, second = result.outcomes
    assert first.measured_nothing and first.errors == {"http": 2} and "prompt too long" in first.top_error
    assert second.measured_nothing  # every request asks for 4 tokens here
    server.behave = lambda i, body: Behaviour()
    redone = resume_sweep(result.run_dir)
    assert [o.point for o in redone.outcomes] == [0, 1] and all(o.ok == 2 for o in redone.outcomes)


class Collect(StopAfterFirstPoint):
    def end_point(self, point, row):
        pass


def test_cached_tokens_on_a_workload_of_new_prompts_warn_and_stamp_the_point(server, tmp_path):
    server.set(Behaviour(cached_tokens=16))
    observer = Collect(None)
    # scrape_interval=0: this server has no /metrics, whose own warning test_server_metrics covers
    result = run_sweep(make_sweep(server.base_url, concurrency_sweep([1], num_requests=2, warmup_requests=0),
                                  scrape_interval=0), tmp_path, observer=observer)
    (outcome,) = result.outcomes
    assert outcome.unexpected_cache_hits and outcome.cached_tokens == 32
    assert read_manifest(result.run_dir).point_results["0"].unexpected_cache_hits is True
    assert len(observer.warnings) == 1 and "cached prompt tokens" in observer.warnings[0]


def test_cached_tokens_on_a_session_workload_are_expected(server, tmp_path):
    server.set(Behaviour(cached_tokens=16))
    workload = resolve_workload("chat-multiturn", seed=1, think_scale=0)
    observer = Collect(None)
    result = run_sweep(make_sweep(server.base_url, concurrency_sweep([1], num_requests=3, warmup_requests=0),
                                  workload=workload, scrape_interval=0), tmp_path, observer=observer)
    assert not result.outcomes[0].unexpected_cache_hits and observer.warnings == []


@pytest.mark.parametrize("source", ["server", "flag"])
def test_sessions_fit_the_servers_context_window(server, tmp_path, source):
    """chat-multiturn grows past 4k tokens; every request sent must fit the window the server (or the flag) gives."""
    server.set(Behaviour())
    window = 2048
    if source == "server":
        server.max_model_len = window
    workload = resolve_workload("chat-multiturn", seed=4, think_scale=0)
    sweep = make_sweep(server.base_url, concurrency_sweep([2], num_requests=30, warmup_requests=0),
                       workload=workload, max_model_len=window if source == "flag" else None)
    result = run_sweep(sweep, tmp_path)
    sent = [(len(b["prompt"]), b["max_tokens"]) for b in server.bodies[1:]]  # after the probe
    assert len(sent) == 30 and all(n_in + n_out <= window for n_in, n_out in sent)
    m = json.loads((result.run_dir / "manifest.json").read_text())  # the file as written
    assert m["target"]["max_model_len"] == window and m["workload"]["context_limit"] == window


def test_a_single_turn_scenario_over_the_window_is_refused_before_the_run(server, tmp_path):
    server.max_model_len = 1024
    sweep = make_sweep(server.base_url, concurrency_sweep([1], num_requests=1),
                       workload=SyntheticWorkload(isl=1000, osl=100))
    with pytest.raises(UserError, match="exceed the server's 1024-token context window"):
        run_sweep(sweep, tmp_path)
    assert list(tmp_path.iterdir()) == []


class InterruptAfter(Collect):
    """Ctrl-C after ``n`` finished requests of the sweep."""

    def __init__(self, n: int) -> None:
        super().__init__(None)
        self.n = n

    def record(self, rec):
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt


def test_a_resumed_point_sends_prompts_new_to_the_server_and_counts_one_attempt(server, tmp_path):
    """The redone point keeps its lengths but not its tokens (the server cached the first try's prompts)."""
    server.set(Behaviour())
    points = concurrency_sweep([1], num_requests=6, warmup_requests=0)
    with pytest.raises(SweepInterrupted) as e:
        run_sweep(make_sweep(server.base_url, points), tmp_path, observer=InterruptAfter(3))
    run = e.value.result.run_dir
    first = {i: body["prompt"] for i, body in enumerate(server.bodies[1:4])}
    sent = len(server.bodies)
    result = resume_sweep(run)
    second = {i: body["prompt"] for i, body in enumerate(server.bodies[sent + 1:sent + 4])}
    assert [len(p) for p in first.values()] == [len(p) for p in second.values()]
    assert all(first[i] != second[i] for i in first)
    spec = WL.sessions(1)[0].requests[0]
    assert first[0] == prompt_token_ids(spec)  # the first attempt sends the seed's prompts exactly
    table = read_requests(run)
    assert table.num_rows == 6 and set(table.column("attempt").to_pylist()) == {1}
    assert result.outcomes[0].attempt == 1 and result.outcomes[0].ok == 6


def test_a_typo_in_the_executor_makes_no_run(server, tmp_path):
    sweep = make_sweep(server.base_url, concurrency_sweep([1], num_requests=1), executor="raay")
    with pytest.raises(ClientError, match="unknown --executor 'raay'"):
        run_sweep(sweep, tmp_path)
    assert list(tmp_path.iterdir()) == []


# --- chat prompts of the requested length ---------------------------------------------------------------------


def long_words_are_two_tokens(text: str) -> int:
    """A server tokenizer that splits words of more than four letters in two (as BPE splits rarer words)."""
    return sum(1 if len(w) <= 4 else 2 for w in text.split())


def test_chat_prompts_use_words_the_servers_tokenize_reads_as_one_token(server, tmp_path):
    server.set(Behaviour())
    server.count_tokens = long_words_are_two_tokens
    sweep = make_sweep(server.base_url, concurrency_sweep([1], num_requests=3, warmup_requests=0),
                       workload=SyntheticWorkload(isl=200, osl=2, range_ratio=1.0), cfg={"api": "chat"})
    result = run_sweep(sweep, tmp_path)
    sent = [long_words_are_two_tokens(b["messages"][0]["content"]) for b in server.bodies[-3:]]
    assert sent == [200, 200, 200]
    rows = read_requests(result.run_dir).to_pylist()
    assert [(r["input_tokens_requested"], r["input_tokens"]) for r in rows] == [(200, 200)] * 3
    assert read_manifest(result.run_dir).target.prompt_words_checked > 16


def test_chat_prompts_fit_a_local_tokenizer_exactly(tmp_path):
    """Random ids decoded to text re-encode longer (about 6 % here); the text is cut back to the requested count."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    rng = __import__("random").Random(0)
    corpus = [" ".join("".join(rng.choice("etaoinshrdlucmfw") for _ in range(rng.randint(2, 9))) for _ in range(50))
              for _ in range(400)]   # enough for all 3000 merges; training is most of this test's time
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=3000, show_progress=False))
    assert tok.get_vocab_size() == 3000
    ids = [rng.randrange(3000) for _ in range(300)]
    assert len(tok.encode(tok.decode(ids), add_special_tokens=False).ids) > 300   # so there is text to cut back
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    cfg = ClientConfig(base_url="http://127.0.0.1:9", model="m", api="chat", tokenizer=str(path), vocab_size=3000)
    from scoville.client.request import Prompts

    for isl in (16, 100, 300):
        spec = SyntheticWorkload(isl=isl, osl=2, range_ratio=1.0, seed=isl).sessions(1)[0].requests[0]
        body, n_in, source = Prompts(cfg).build(spec)
        content = __import__("json").loads(body)["messages"][0]["content"]
        assert (n_in, source) == (isl, "tokenizer")
        assert len(tok.encode(content, add_special_tokens=False).ids) == isl
