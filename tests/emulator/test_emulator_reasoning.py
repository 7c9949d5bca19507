"""The emulator as a reasoning model (--reasoning-tokens): its chunks, and a sweep that measures it end to end."""

from __future__ import annotations

import json
import re

import pytest
from emulator_support import ScriptedEngine, run

from scoville.client.sse import StreamParser
from scoville.emulator.protocol import parse
from scoville.emulator.server import Emulator, EmulatorOptions, _Progress
from scoville.sim.engine_api import TokenEvent


class _Collect:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data


def _stream(reasoning: int, counts: list[int], chat: bool = True) -> bytes:
    """The SSE bytes of one request whose engine releases ``counts`` tokens per step."""
    emu = Emulator(ScriptedEngine(1, 0.01), EmulatorOptions(served_model_names=["m"], max_model_len=1000,
                                                            vocab_size=32000, reasoning_tokens=reasoning))
    body = {"model": "m", "max_tokens": sum(counts), "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    body.update({"messages": [{"role": "user", "content": "hi"}]} if chat else {"prompt": [1, 2, 3]})
    req = parse(body, chat=chat)
    plan = run(emu.plan(req))
    sink = _Collect()
    prog = _Progress(emu, req, plan, 0.0, sink)  # type: ignore[arg-type]
    for i, k in enumerate(counts):
        prog.on_events([TokenEvent(plan.spec.request_id, float(i), k, finished=i == len(counts) - 1)])
    return sink.data


def test_the_first_n_tokens_are_reasoning_and_a_chunk_may_turn_to_the_answer():
    data = _stream(3, [2, 2, 2])
    deltas = [json.loads(m)["choices"][0]["delta"] for m in re.findall(rb"data: (\{.*?\})\n\n", data)
              if json.loads(m)["choices"]]
    assert set(deltas[0]) == {"role", "reasoning_content"}
    assert set(deltas[1]) == {"reasoning_content", "content"}       # the turn: one token each side
    assert set(deltas[2]) == {"content"}
    p = StreamParser()
    p.feed(data, 1.0)
    assert p.counts == [2, 2, 2] and p.reasoning == 3 and p.usage_completion == 6
    assert p.usage_reasoning == 3


def test_the_usage_says_how_many_tokens_were_reasoning_where_a_coalesced_chunk_cannot():
    # 3 reasoning tokens, then a chunk of 4 that turns to the answer after one of them (tokens coalesced under
    # load): the chunk alone would give it 3 reasoning tokens; the server's usage says 1, so 3 in all
    p = StreamParser()
    p.feed(_stream(3, [2, 4]), 1.0)
    assert p.counts == [2, 4] and p.reasoning == 2 + 3
    assert p.usage_reasoning == 3 and p.usage_completion == 6


@pytest.mark.parametrize("reasoning, chat, expect", [(10, True, 4), (0, True, 0), (3, False, 0)],
                         ids=["never-answers", "off", "completions-have-no-reasoning"])
def test_reasoning_is_capped_by_the_answer_and_only_on_chat(reasoning, chat, expect):
    p = StreamParser()
    p.feed(_stream(reasoning, [1, 1, 1, 1], chat=chat), 1.0)
    assert p.reasoning == expect and p.done
    assert (p.t_first_content is None) == (expect == 4)


def test_the_plain_answer_keeps_the_reasoning_apart():
    emu = Emulator(ScriptedEngine(1, 0.01), EmulatorOptions(served_model_names=["m"], max_model_len=1000,
                                                            vocab_size=32000, reasoning_tokens=2))
    req = parse({"model": "m", "max_tokens": 5, "ignore_eos": True, "messages": [{"role": "user", "content": "x"}]},
                chat=True)
    prog = _Progress(emu, req, run(emu.plan(req)), 0.0, None)
    prog.on_events([TokenEvent(prog.plan.spec.request_id, 0.0, 5, finished=True)])
    message = json.loads(prog.full_response().body)["choices"][0]["message"]
    assert emu.tokenizer.decode(prog.token_ids[:2]) == message["reasoning_content"]
    assert emu.tokenizer.decode(prog.token_ids[2:]) == message["content"]


def test_a_negative_reasoning_count_is_refused_in_one_line(capsys):
    from scoville.emulator.run import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--port", "0", "--reasoning-tokens", "-1"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == "error: --reasoning-tokens must be >= 0 (got -1); 0 streams no reasoning"
