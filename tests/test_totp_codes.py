"""``tests.totp_codes.current_code``: a code is never made so late in its period that the
server checks it in the next one."""

from __future__ import annotations

import pyotp

from tests import totp_codes


def test_a_code_late_in_its_period_waits_for_the_next(monkeypatch):
    totp = pyotp.TOTP("JBSWY3DPEHPK3PXP")  # fixed: its two codes below differ
    clock = {"now": 1_000_000 * totp.interval + totp.interval - 1.0}  # 1 s left
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        clock["now"] += seconds

    monkeypatch.setattr(totp_codes.time, "time", lambda: clock["now"])
    monkeypatch.setattr(totp_codes.time, "sleep", sleep)
    monkeypatch.setattr(totp, "now", lambda: totp.at(clock["now"]))
    code = totp_codes.current_code(totp)
    assert slept
    assert 1.0 < sum(slept) < 1.5
    assert code == totp.at(1_000_001 * totp.interval)
    assert code != totp.at(1_000_000 * totp.interval)

    clock["now"] = 1_000_000 * totp.interval + 3.0  # early in a period: no wait
    slept.clear()
    assert totp_codes.current_code(totp) == totp.at(1_000_000 * totp.interval)
    assert slept == []
