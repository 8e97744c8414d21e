"""A TOTP code that the server will check in the period it was made in. allauth accepts the
current period's code only (``MFA_TOTP_TOLERANCE`` 0): a code made in the last instant of a
period and checked in the next one is refused, which made a browser test fail about once in
a while (the code typed at hh:mm:29.9, checked at hh:mm:30.0)."""

from __future__ import annotations

import time

import pyotp

# Enough for a browser to type the code and send it, on a loaded machine.
MARGIN_SECONDS = 5.0


def current_code(totp: pyotp.TOTP, margin: float = MARGIN_SECONDS) -> str:
    """``totp``'s code, made at least ``margin`` seconds before its period ends (waiting for
    the next period when fewer are left)."""
    left = totp.interval - time.time() % totp.interval
    if left < margin:
        time.sleep(left + 0.05)
    return totp.now()
