"""Domain errors: what a service could not do and why, in words a user can act on.

They know nothing of HTTP. ``config.errors`` maps each kind to a status code, once, for the
REST API (DRF's exception handler) and for the pages, so every endpoint answers alike.
"""

from __future__ import annotations


class DomainError(Exception):
    """A service refused; the message says why. The base kind: it conflicts with what is there."""


class InvalidInput(DomainError):
    """Bad input; the message names the field."""


class NotAllowed(DomainError):
    """The user's role does not allow this."""


class NotFound(DomainError):
    """No such object for this user (someone else's is answered alike)."""


class Conflict(DomainError):
    """The request conflicts with the current state (a vote already there, a run finished)."""


class Unavailable(DomainError):
    """A service this needs (the task broker) cannot be reached; trying later may work."""
