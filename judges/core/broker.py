"""The broker refusing a judges job's task, as the domain's Unavailable."""

from __future__ import annotations

from annotation.core.errors import Unavailable


class BrokerUnavailable(Unavailable):
    """The task broker refused a message; the message says what was done about it."""
