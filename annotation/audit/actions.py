"""Every action the audit log records, with the words the audit page shows for it. A service
that makes an audited change names its action here (docs/audit.md lists them)."""

from __future__ import annotations

ACTIONS: dict[str, str] = {
    "project.created": "Project created",
    "project.settings_changed": "Project settings changed",
    "project.consensus_rule_changed": "Consensus rule changed (and re-applied)",
    "project.paused": "Project paused or resumed",
    "member.added": "Member added",
    "member.role_changed": "Member's role changed",
    "member.removed": "Member removed",
    "member.unpaused": "Annotator unpaused",
    "invitation.created": "Invitation sent",
    "invitation.resent": "Invitation sent again",
    "invitation.revoked": "Invitation revoked",
    "invitation.accepted": "Invitation accepted",
    "pair.adjudicated": "Pair adjudicated",
    "consensus.reapplied": "Consensus rule re-applied",
    "pairs.gold_set": "Pairs made gold",
    "pairs.gold_cleared": "Pairs no longer gold",
    "pairs.priority_set": "Pairs' priority set",
    "pairs.restricted": "Pairs restricted to annotators",
    "pairs.excluded": "Pairs excluded",
    "pairs.included": "Excluded pairs included again",
    "leases.released": "Leases released",
    "flag.replied": "Flag answered",
    "flag.resolved": "Flag resolved",
    "release.created": "Release created",
    "release.published": "Release published",
    "judge.created": "Judge added",
    "judge.changed": "Judge changed",
    "filter_run.created": "Filter run started",
    "filter_run.cancelled": "Filter run cancelled",
    "webhook.created": "Webhook added",
    "webhook.changed": "Webhook changed",
    "webhook.removed": "Webhook removed",
    "webhook.secret_rotated": "Webhook secret rotated",
    "api_token.created": "API token made",
    "api_token.revoked": "API token revoked",
    "admin.added": "Added in the admin",
    "admin.changed": "Changed in the admin",
    "admin.deleted": "Deleted in the admin",
    # Site-wide (project=None): an account's sign-in settings (two-factor login turned on or
    # off), and a first single sign-on that linked or made an account.
    "sign_in.settings_changed": "Sign-in settings changed",
    "account.sso_linked": "Account linked to single sign-on",
    "account.sso_created": "Account made by single sign-on",
}

# What a secret's value is recorded as: that it changed, never what it is.
SECRET_CHANGED = "(changed)"
