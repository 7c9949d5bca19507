"""``python -m scoville.emulator``: see :mod:`scoville.emulator.run`."""

from scoville.emulator.run import main

main()
