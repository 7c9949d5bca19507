"""Fixtures of tests/client; the helpers live in client_support.py so test modules can import them by a unique name."""

from client_support import *  # noqa: F401,F403  (pytest finds the fixtures in this namespace)
