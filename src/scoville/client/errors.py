"""User-facing errors of the measuring client."""

from __future__ import annotations

from scoville.errors import UserError


class ClientError(UserError):
    """A target the client cannot measure (unreachable, wrong model, bad option); message is one line."""
