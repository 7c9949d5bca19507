"""Fixtures of tests/emulator; the helpers live in emulator_support.py so test modules can import them by a unique
name."""

from emulator_support import *  # noqa: F401,F403  (pytest finds the fixtures in this namespace)
