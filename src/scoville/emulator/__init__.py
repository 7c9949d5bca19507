"""The emulator: the simulator's serving engine behind a real OpenAI-compatible HTTP server.

``scoville serve`` (or :func:`scoville.emulator.launch.spawn_emulator` for a
child process on a free port) gives gateways, dashboards and scoville's own
client a target that behaves like the simulated system in real time.
Modules: ``server`` (aiohttp app), ``realtime`` (engine loop on the wall clock),
``protocol`` (request validation, OpenAI errors), ``tokenizer`` (local,
deterministic), ``prom`` (``/metrics``), ``build`` (SimConfig -> Emulator),
``run`` (serve until signalled), ``launch`` (child process).
"""
