"""The real-time loop in-process (no HTTP): schedule honoured, no lost wake-ups, chunks rendered ahead, GC in slack."""

from __future__ import annotations

import asyncio
import gc
import json

from emulator_support import ScriptedEngine

from scoville.emulator.collector import SlackCollector
from scoville.emulator.protocol import parse
from scoville.emulator.realtime import RealTimeLoop
from scoville.emulator.server import Emulator, EmulatorOptions, _Progress
from scoville.sim.engine_api import TokenEvent
from scoville.workload.spec import RequestSpec


def _spec(i: int) -> RequestSpec:
    return RequestSpec(request_id=f"r{i}", input_tokens=8, output_tokens=5)


def test_tokens_leave_at_their_scheduled_time_never_before_and_all_of_them():
    engine = ScriptedEngine(tokens=5, interval=0.004)
    seen: dict[str, list[tuple[float, list[TokenEvent]]]] = {}
    worst_loop_lag = 0.0

    async def main() -> None:
        nonlocal worst_loop_lag
        loop = RealTimeLoop(engine)
        loop.start()

        async def lag_probe() -> None:
            """How late this event loop runs anything (a host that stops the process stops both alike)."""
            nonlocal worst_loop_lag
            aio = asyncio.get_running_loop()
            while True:
                t = aio.time()
                await asyncio.sleep(0.001)
                worst_loop_lag = max(worst_loop_lag, aio.time() - t - 0.001)

        probe = asyncio.create_task(lag_probe())
        try:
            def sink(rid: str):
                def on_events(events: list[TokenEvent]) -> bool:
                    seen.setdefault(rid, []).append((loop.now(), events))
                    return any(e.finished for e in events)
                return on_events

            futures = [loop.submit(_spec(i), sink(f"r{i}")) for i in range(3)]
            await asyncio.wait_for(asyncio.gather(*futures), 60)
        finally:
            probe.cancel()
            await loop.stop()

    asyncio.run(main())
    assert sorted(seen) == ["r0", "r1", "r2"]
    for deliveries in seen.values():
        assert sum(e.count for _, evs in deliveries for e in evs) == 5
        for sent, events in deliveries:
            assert all(sent >= e.t for e in events)          # never early
            # and not stalled: no later than the loop itself ran late (a loaded host delays both alike)
            assert sent - max(e.t for e in events) < worst_loop_lag + 0.05


def test_a_request_submitted_as_the_previous_one_ends_is_not_lost():
    # A closed-loop caller submits its next request from the callback that the previous one's end wakes:
    # that runs while the loop yields after delivering, with the engine idle. The loop must still see it.
    engine = ScriptedEngine(tokens=2, interval=0.001)

    async def closed_loop(loop: RealTimeLoop) -> int:
        for i in range(20):
            await loop.submit(_spec(i), lambda evs: any(e.finished for e in evs))  # awaited directly: no extra hop
        return 20

    async def main() -> int:
        loop = RealTimeLoop(engine)
        loop.start()
        try:
            return await asyncio.wait_for(closed_loop(loop), 5)
        finally:
            await loop.stop()

    assert asyncio.run(main()) == 20


def _progress(emu: Emulator, body: dict) -> tuple[_Progress, list[bytes]]:
    written: list[bytes] = []

    class Sink:
        def write(self, data: bytes) -> None:
            written.append(data)

    req = parse(body, chat="messages" in body)
    return _Progress(emu, req, asyncio.run(emu.plan(req)), 0.0, Sink()), written  # type: ignore[arg-type]


def test_a_chunk_rendered_ahead_is_the_chunk_rendered_when_due():
    emu = Emulator(ScriptedEngine(1, 1.0), EmulatorOptions(served_model_names=["m"], max_model_len=4096,
                                                           vocab_size=32000))
    for body in ({"model": "m", "prompt": [1000] * 8, "max_tokens": 6, "ignore_eos": True, "stream": True,
                  "return_token_ids": True,
                  "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
                 {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 6,
                  "ignore_eos": True, "stream": True}):
        ahead, ahead_out = _progress(emu, body)
        when_due, due_out = _progress(emu, body)
        steps = [[TokenEvent("x", 0.1, 1, cached_tokens=4)], [TokenEvent("x", 0.2, 2)],
                 [TokenEvent("x", 0.3, 3, finished=True)]]
        for events in steps:
            ahead.prepare(events)
            ahead.on_events(events)
            when_due.on_events(events)
        # The request ids differ; everything else must be the same bytes.
        assert [c.replace(ahead.plan.spec.request_id.encode(), b"ID") for c in ahead_out] == \
               [c.replace(when_due.plan.spec.request_id.encode(), b"ID") for c in due_out]
        payloads = [p for c in ahead_out for p in c.decode().split("\n\n") if p]
        assert payloads[-1] == "data: [DONE]"
        chunks = [json.loads(p.removeprefix("data: ")) for p in payloads[:-1]]
        assert chunks[2]["choices"][0]["finish_reason"] == "length"
        if body.get("stream_options"):
            assert [c["usage"]["completion_tokens"] for c in chunks] == [1, 3, 6, 6]
            assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 4
            assert sum(len(c["choices"][0]["token_ids"]) for c in chunks[:3]) == 6
        else:
            assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
            assert "role" not in chunks[1]["choices"][0]["delta"]


def test_a_prepared_chunk_is_dropped_when_other_events_come_due():
    emu = Emulator(ScriptedEngine(1, 1.0), EmulatorOptions(served_model_names=["m"], max_model_len=4096,
                                                           vocab_size=32000))
    body = {"model": "m", "prompt": [1000] * 8, "max_tokens": 4, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    prog, out = _progress(emu, body)
    prog.prepare([TokenEvent("x", 0.1, 1)])
    prog.on_events([TokenEvent("x", 0.1, 1), TokenEvent("x", 0.2, 1)])  # the loop was late: two steps at once
    assert json.loads(out[0].decode().removeprefix("data: "))["usage"]["completion_tokens"] == 2


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_collector_runs_young_collections_only_in_slack_and_full_ones_when_idle():
    clock = FakeClock()
    collector = SlackCollector(full_interval_s=30.0, clock=clock)
    was_enabled = gc.isenabled()
    threshold = gc.get_threshold()
    try:
        gc.set_threshold(50, 10, 10)
        collector.start()
        assert not gc.isenabled()
        gc.collect()  # start from empty generations
        junk = [[i] for i in range(60)]  # tracked allocations: the young generation is due
        collector.collect(slack_s=0.0, idle=False)
        assert collector.collections == [0, 0, 0]               # no slack: wait
        collector.collect(slack_s=1.0, idle=False)
        assert collector.collections[0] == 1 and collector.collections[2] == 0
        junk += [[i] for i in range(600)]                        # ten thresholds behind: collect regardless
        collector.collect(slack_s=0.0, idle=False)
        assert collector.collections[0] == 2
        collector.collect(slack_s=1.0, idle=True)                # idle, but the last full one was just now
        assert collector.collections[2] == 0
        clock.t = 31.0
        collector.collect(slack_s=1.0, idle=True)
        assert collector.collections[2] == 1 and gc.get_freeze_count() > 0
        del junk
    finally:
        collector.stop()
        gc.unfreeze()
        gc.set_threshold(*threshold)
    assert gc.isenabled() == was_enabled


def test_collector_runs_a_full_collection_on_a_server_that_is_never_idle():
    clock = FakeClock()
    collector = SlackCollector(full_interval_s=30.0, max_full_interval_s=600.0, clock=clock)
    collector.start()
    frozen = gc.get_freeze_count()
    try:
        clock.t = 601.0
        collector.collect(slack_s=0.0, idle=False)
        assert collector.collections[2] == 1 and gc.get_freeze_count() == frozen  # busy: nothing frozen
    finally:
        collector.stop()
