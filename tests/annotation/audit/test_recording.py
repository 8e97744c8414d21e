"""Each audited service writes exactly one event, in its transaction, naming who did what with
the changed fields before and after, and never a secret (docs/audit.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from rest_framework.authtoken.models import Token

from annotation.accounts.services import (
    api_token_create,
    api_token_revoke,
    command_line_token_revoke,
)
from annotation.audit.actions import ACTIONS, SECRET_CHANGED
from annotation.audit.services import AUDIT_TEXT_MAX_CHARS, audit_record, audit_url
from annotation.decisions.services import consensus_reapply, pair_adjudicate
from annotation.models import AuditEvent, Membership, PairStatus, Role, WebhookEndpoint
from annotation.pairs import services as pairs
from annotation.projects import invitations
from annotation.projects.services import (
    member_add,
    member_remove,
    member_role_change,
    project_create,
    project_update,
)
from annotation.queue.services import levers
from annotation.webhooks import services as webhooks
from judges.roster.services import judge_create, judge_update
from judges.runs.services import filter_run_cancel, filter_run_create
from tests.conftest import ROOT
from tests.factories import JudgeFactory, PairFactory, UserFactory, VoteFactory

pytestmark = pytest.mark.django_db

HOOK_URL = "http://127.0.0.1:9/hook"


@dataclass
class Case:
    """The event a change should leave: its action, role, target, before and after."""

    action: str
    before: dict
    after: dict
    role: str = Role.CURATOR
    site_wide: bool = False
    target_type: str = ""
    extra: dict = field(default_factory=dict)


def _as_logged(moment) -> str:
    """A time as the log's JSON keeps it (milliseconds, as Django's encoder writes it)."""
    return DjangoJSONEncoder().default(moment)


def _settings(project, **changes) -> dict:
    fields = [
        "name",
        "guidelines",
        "scale",
        "overlap",
        "min_agree",
        "max_extra_votes",
        "lease_minutes",
        "require_rationale",
        "gold_rate",
        "gold_min_accuracy",
        "gold_pause",
        "paused",
        "min_seconds_per_vote",
    ]
    return {**{name: getattr(project, name) for name in fields}, **changes}


def settings_changed(project, carol, alice):
    project_update(project=project, actor=carol, **_settings(project, name="Renamed", overlap=4))
    return Case(
        "project.settings_changed",
        {"name": "Demo project", "overlap": 3},
        {"name": "Renamed", "overlap": 4},
        target_type="project",
    )


def consensus_rule_changed(project, carol, alice):
    project_update(project=project, actor=carol, **_settings(project, min_agree=3))
    return Case("project.consensus_rule_changed", {"min_agree": 2}, {"min_agree": 3})


def member_added(project, carol, alice):
    member_add(project=project, role=Role.RESEARCHER, username="newcomer", actor=carol)
    after = {"user": "newcomer", "role": Role.RESEARCHER, "account_created": True}
    return Case("member.added", {}, after, target_type="membership")


def member_added_with_password(project, carol, alice):
    member_add(project=project, role=Role.ANNOTATOR, username="pw", password="s3cret!", actor=carol)
    after = {"user": "pw", "role": Role.ANNOTATOR, "account_created": True}
    return Case("member.added", {}, {**after, "password": SECRET_CHANGED})


def member_re_roled_by_add(project, carol, alice):
    member_add(project=project, role=Role.RESEARCHER, username="alice", actor=carol)
    return Case("member.role_changed", {"role": Role.ANNOTATOR}, {"role": Role.RESEARCHER})


def member_role_changed(project, carol, alice):
    membership = Membership.objects.get(project=project, user=alice)
    member_role_change(membership=membership, role=Role.RESEARCHER, actor=carol)
    return Case("member.role_changed", {"role": Role.ANNOTATOR}, {"role": Role.RESEARCHER})


def member_removed(project, carol, alice):
    member_remove(membership=Membership.objects.get(project=project, user=alice), actor=carol)
    return Case("member.removed", {"user": "alice", "role": Role.ANNOTATOR}, {})


def invitation_created(project, carol, alice):
    invitations.invitation_create(
        project=project, email="new@example.com", role=Role.ANNOTATOR, invited_by=carol
    )
    after = {"email": "new@example.com", "role": Role.ANNOTATOR}
    return Case("invitation.created", {}, after, target_type="invitation")


def _invited(project, carol):
    invitation = invitations.invitation_create(
        project=project, email="new@example.com", role=Role.ANNOTATOR, invited_by=carol
    )
    return invitation


def invitation_resent(project, carol, alice):
    invitation = _invited(project, carol)
    invitations.invitation_resend(invitation=invitation, actor=carol)
    return Case("invitation.resent", {}, {"link": SECRET_CHANGED})


def invitation_revoked(project, carol, alice):
    invitation = _invited(project, carol)
    invitations.invitation_revoke(invitation=invitation, actor=carol)
    invitation.refresh_from_db()
    after = {"revoked_at": _as_logged(invitation.revoked_at)}
    return Case("invitation.revoked", {"revoked_at": None}, after)


def adjudicated(project, carol, alice):
    pair = PairFactory(project=project, status=PairStatus.DISPUTED, dispute_reason="no_majority")
    pair_adjudicate(pair=pair, curator=carol, label="B", note="B keeps the criterion")
    after = {"status": "consensus", "consensus_label": "B", "note": "B keeps the criterion"}
    return Case(
        "pair.adjudicated", {"status": "disputed", "consensus_label": ""}, after, target_type="pair"
    )


def reapplied(project, carol, alice):
    pair = PairFactory(
        project=project,
        external_id="p1",
        status=PairStatus.CONSENSUS,
        consensus_label="B",
        vote_count=3,
    )
    VoteFactory.create_batch(3, pair=pair, side="A")
    consensus_reapply(project=project, actor=carol)
    after = {
        "rule": "majority",
        "examined": 1,
        "adjudicated_kept": 0,
        "changed": ["p1: consensus B -> consensus A"],
        "changed_count": 1,
    }
    return Case("consensus.reapplied", {}, after, target_type="project")


def _two_pairs(project):
    return [
        PairFactory(project=project, external_id=name, status=PairStatus.QUEUED)
        for name in ("p1", "p2")
    ]


def gold_set(project, carol, alice):
    chosen = _two_pairs(project)
    pairs.pairs_set_gold(project=project, pair_ids=[p.pk for p in chosen], label="A", actor=carol)
    after = {"pairs": ["p1", "p2"], "count": 2, "gold_label": "A"}
    return Case("pairs.gold_set", {"gold_labels": {}}, after, target_type="pairs")


def priority_set(project, carol, alice):
    chosen = _two_pairs(project)
    ids = [p.pk for p in chosen]
    pairs.pairs_set_priority(project=project, pair_ids=ids, priority=5, actor=carol)
    before = {"priorities": {"p1": 0, "p2": 0}}
    return Case("pairs.priority_set", before, {"pairs": ["p1", "p2"], "count": 2, "priority": 5})


def restricted(project, carol, alice):
    chosen = _two_pairs(project)
    ids = [p.pk for p in chosen]
    pairs.pairs_restrict(project=project, pair_ids=ids, annotators=[alice], actor=carol)
    after = {"pairs": ["p1", "p2"], "count": 2, "annotators": ["alice"]}
    return Case("pairs.restricted", {}, after)


def excluded(project, carol, alice):
    ids = [p.pk for p in _two_pairs(project)]
    pairs.pairs_exclude(project=project, pair_ids=ids, reason="image 2 is blank", actor=carol)
    before = {"statuses": {"p1": PairStatus.QUEUED, "p2": PairStatus.QUEUED}}
    after = {"pairs": ["p1", "p2"], "count": 2, "status": "excluded", "reason": "image 2 is blank"}
    return Case("pairs.excluded", before, after, target_type="pairs")


def included(project, carol, alice):
    ids = [p.pk for p in _two_pairs(project)]
    pairs.pairs_exclude(project=project, pair_ids=ids, reason="blank", actor=None)
    pairs.pairs_include(project=project, pair_ids=ids, actor=carol)
    after = {"pairs": ["p1", "p2"], "count": 2}
    return Case("pairs.included", {"status": "excluded"}, after, target_type="pairs")


def paused(project, carol, alice):
    levers.project_pause(project=project, paused=True, actor=carol)
    return Case("project.paused", {"paused": False}, {"paused": True})


def unpaused(project, carol, alice):
    Membership.objects.filter(project=project, user=alice).update(paused=True)
    levers.membership_unpause(project=project, annotator=alice, actor=carol)
    return Case("member.unpaused", {"paused": True}, {"paused": False})


def leases_released(project, carol, alice):
    levers.leases_release(project=project, older_than_minutes=30, actor=carol)
    return Case("leases.released", {}, {"released": 0, "older_than_minutes": 30})


def webhook_created(project, carol, alice):
    webhooks.webhook_create(project=project, url=HOOK_URL, events=["pair.decided"], actor=carol)
    after = {
        "url": HOOK_URL,
        "events": ["pair.decided"],
        "description": "",
        "active": True,
        "secret": SECRET_CHANGED,
    }
    return Case("webhook.created", {}, after, target_type="webhookendpoint")


def _endpoint(project) -> WebhookEndpoint:
    return WebhookEndpoint.objects.create(
        project=project, url=HOOK_URL, events=["pair.decided"], secret="whsec_x"
    )


def webhook_changed(project, carol, alice):
    webhooks.webhook_update(endpoint=_endpoint(project), active=False, actor=carol)
    return Case("webhook.changed", {"active": True}, {"active": False})


def webhook_removed(project, carol, alice):
    webhooks.webhook_delete(endpoint=_endpoint(project), actor=carol)
    before = {"url": HOOK_URL, "events": ["pair.decided"], "description": "", "active": True}
    return Case("webhook.removed", before, {})


def webhook_rotated(project, carol, alice):
    webhooks.webhook_secret_rotate(endpoint=_endpoint(project), actor=carol)
    return Case("webhook.secret_rotated", {}, {"secret": SECRET_CHANGED})


def token_created(project, carol, alice):
    token, _key = api_token_create(user=carol, name="laptop")
    after = {"name": "laptop", "key_start": token.key_start, "expires_at": None}
    return Case("api_token.created", {}, after, role="", site_wide=True, target_type="apitoken")


def token_revoked(project, carol, alice):
    token, _key = api_token_create(user=carol, name="laptop")
    api_token_revoke(user=carol, token_id=token.pk)
    token.refresh_from_db()
    after = {"revoked_at": _as_logged(token.revoked_at)}
    return Case("api_token.revoked", {"revoked_at": None}, after, role="", site_wide=True)


def command_line_token_revoked(project, carol, alice):
    Token.objects.create(user=carol)
    command_line_token_revoke(user=carol)
    before = {"command_line_token": True}
    return Case("api_token.revoked", before, {}, role="", site_wide=True, target_type="token")


def judge_added(project, carol, alice):
    operator = UserFactory(username="op", is_staff=True)
    judge_create(name="h1", kind="heuristic", actor=operator)
    after = {"name": "h1", "kind": "heuristic", "enabled": True, "projects": []}
    return Case("judge.created", {}, after, role="operator", site_wide=True, target_type="judge")


def judge_changed(project, carol, alice):
    operator = UserFactory(username="op", is_staff=True)
    judge = JudgeFactory(name="h1")
    judge_update(judge=judge, projects=[project], enabled=False, actor=operator)
    before = {"enabled": True, "projects": []}
    after = {"enabled": False, "projects": ["demo"]}
    return Case("judge.changed", before, after, role="operator", site_wide=True)


def filter_run_started(project, carol, alice):
    PairFactory(project=project, status=PairStatus.IMPORTED)
    filter_run_create(project=project, judges=[JudgeFactory(name="h1")], created_by=carol)
    after = {
        "judges": ["h1"],
        "threshold": 0.9,
        "budget_per_task": None,
        "min_valid_votes": 1,
        "pairs": 1,
    }
    return Case("filter_run.created", {}, after, target_type="filterrun")


def filter_run_cancelled(project, carol, alice):
    PairFactory(project=project, status=PairStatus.IMPORTED)
    run = filter_run_create(project=project, judges=[JudgeFactory(name="h1")], created_by=carol)
    filter_run_cancel(run=run, actor=carol)
    return Case("filter_run.cancelled", {"status": "pending"}, {"status": "cancelled"})


CASES = [
    settings_changed,
    consensus_rule_changed,
    member_added,
    member_added_with_password,
    member_re_roled_by_add,
    member_role_changed,
    member_removed,
    invitation_created,
    invitation_resent,
    invitation_revoked,
    adjudicated,
    reapplied,
    gold_set,
    priority_set,
    restricted,
    excluded,
    included,
    paused,
    unpaused,
    leases_released,
    webhook_created,
    webhook_changed,
    webhook_removed,
    webhook_rotated,
    token_created,
    token_revoked,
    command_line_token_revoked,
    judge_added,
    judge_changed,
    filter_run_started,
    filter_run_cancelled,
]


@pytest.mark.parametrize("change", CASES, ids=[case.__name__ for case in CASES])
def test_each_audited_change_writes_one_event(change, project, carol, alice, settings):
    settings.ARBITER_WEBHOOK_ALLOW_PRIVATE = True
    first = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    case = change(project, carol, alice)
    events = list(AuditEvent.objects.filter(action=case.action, id__gt=first))
    assert len(events) == 1, [e.action for e in AuditEvent.objects.filter(id__gt=first)]
    (event,) = events
    assert event.before == case.before
    assert event.after == case.after
    assert event.actor_role == case.role
    if case.site_wide:
        assert (event.project_ref, event.project_slug) == (None, "")
    else:
        assert (event.project_ref, event.project_slug) == (project.pk, "demo")
        assert event.actor_label == "carol"
    if case.target_type:
        assert event.target_type == case.target_type


def test_a_change_that_changes_nothing_records_nothing(project, carol):
    project_update(project=project, actor=carol, **_settings(project))
    consensus_reapply(project=project, actor=carol, dry_run=True)
    webhooks.webhook_update(endpoint=_endpoint(project), active=True, actor=carol)
    assert not AuditEvent.objects.exists()


def test_long_texts_are_kept_as_their_start_and_length(project, carol):
    guidelines = "Prefer the image that follows the prompt. " * 1000
    project_update(project=project, actor=carol, **_settings(project, guidelines=guidelines))
    (event,) = AuditEvent.objects.all()
    kept = event.after["guidelines"]
    assert kept.startswith(guidelines[:AUDIT_TEXT_MAX_CHARS])
    assert kept.endswith(f"… ({len(guidelines):,} characters)")


def test_the_command_line_is_recorded_without_an_actor(db):
    project = project_create(slug="cli", name="From the command line")
    (event,) = AuditEvent.objects.all()
    assert (event.action, event.actor_ref, event.actor_label, event.actor_role) == (
        "project.created",
        None,
        "",
        "",
    )
    assert event.after["slug"] == "cli"
    assert event.project_ref == project.pk


def test_accepting_an_invitation_records_the_membership_and_the_invitation(project, carol):
    invitation = _invited(project, carol)
    invitations.invitation_accept(invitation=invitation, password="a long new password 1")
    added, accepted = AuditEvent.objects.filter(id__gt=0).order_by("id")[1:]
    assert (added.action, added.after["role"]) == ("member.added", Role.ANNOTATOR)
    assert (added.actor_label, added.actor_role) == ("new@example.com", Role.ANNOTATOR)
    assert (accepted.action, accepted.actor_label) == ("invitation.accepted", "new@example.com")
    assert accepted.actor_role == Role.ANNOTATOR


def test_a_refused_change_leaves_no_event(project, carol):
    membership = Membership.objects.get(project=project, user=carol)
    with pytest.raises(Exception, match="last curator"):
        member_remove(membership=membership, actor=carol)
    assert not AuditEvent.objects.exists()


def test_no_secret_reaches_the_log(project, carol, settings):
    settings.ARBITER_WEBHOOK_ALLOW_PRIVATE = True
    endpoint = webhooks.webhook_create(
        project=project, url=HOOK_URL, events=["pair.decided"], actor=carol
    )
    rotated = webhooks.webhook_secret_rotate(endpoint=endpoint, actor=carol)
    _token, key = api_token_create(user=carol, name="laptop")
    member_add(project=project, role=Role.ANNOTATOR, username="pw", password="s3cret!", actor=carol)
    logged = " ".join(f"{e.before} {e.after} {e.target_label}" for e in AuditEvent.objects.all())
    for secret in (endpoint.secret, rotated, key, "s3cret!"):
        assert secret not in logged


def test_an_unknown_action_is_refused(project, carol):
    with pytest.raises(ValueError, match="action"):
        audit_record(actor=carol, project=project, action="made.up", target=project)
    assert not AuditEvent.objects.exists()


def test_docs_list_every_action():
    """docs/audit.md's table names each action a service may record."""
    listed = (ROOT / "docs" / "audit.md").read_text()
    assert [action for action in ACTIONS if f"`{action}`" not in listed] == []


def test_a_webhook_url_is_recorded_without_its_token(project, carol, settings):
    settings.ARBITER_WEBHOOK_ALLOW_PRIVATE = True
    endpoint = webhooks.webhook_create(
        project=project,
        url="http://127.0.0.1:9/in?token=tok3n-one#frag",
        events=["pair.decided"],
        actor=carol,
    )
    webhooks.webhook_update(
        endpoint=endpoint, url="http://127.0.0.1:9/in?token=tok3n-two", actor=carol
    )
    created, changed = AuditEvent.objects.order_by("id")
    assert (created.after["url"], created.target_label) == ("http://127.0.0.1:9/in",) * 2
    # Only the token changed: the log says so, without either. (A URL with a user name and
    # password is refused on input; audit_url drops them anyway.)
    assert (changed.before, changed.after) == (
        {"url": "http://127.0.0.1:9/in"},
        {"url": "http://127.0.0.1:9/in (query or credentials (changed))"},
    )
    logged = " ".join(f"{e.before} {e.after} {e.target_label}" for e in (created, changed))
    for secret in ("tok3n-one", "tok3n-two", "frag"):
        assert secret not in logged


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("https://hooks.example/in", "https://hooks.example/in"),
        ("https://u:p@hooks.example:8443/a/b?x=1", "https://hooks.example:8443/a/b"),
        ("http://[::1]:9/in?t=1", "http://[::1]:9/in"),
    ],
)
def test_audit_url_keeps_the_address_only(url, kept):
    assert audit_url(url) == kept
