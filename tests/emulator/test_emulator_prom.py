"""/metrics text: every sample line stays parseable whatever the served model is called."""

import re

from scoville.emulator.collector import SlackCollector
from scoville.emulator.prom import ServerMetrics
from scoville.sim.engine_api import EngineStats

# name{label="value",...} number, with \\, \" and \n the only escapes inside a value (Prometheus text format 0.0.4)
_SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*\{(?:[a-zA-Z_]\w*="(?:[^"\\\n]|\\[\\"n])*",?)*\} \S+$')


def test_a_quote_or_backslash_in_the_model_name_is_escaped():
    m = ServerMetrics('team "a"\\llama')
    m.ttft.observe(0.02)
    text = m.render(EngineStats(running=1, waiting=0, kv_usage=0.5, prompt_tokens_total=8,
                                generation_tokens_total=4), SlackCollector())
    samples = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert samples and all(_SAMPLE.match(ln) for ln in samples), next(ln for ln in samples if not _SAMPLE.match(ln))
    assert 'model_name="team \\"a\\"\\\\llama"' in text
