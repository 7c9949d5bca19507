"""The one error type a user can cause: the CLI prints its message on one line, no traceback."""


class UserError(Exception):
    """Bad input or an unreachable/failing dependency; the message says what and how to fix it."""
