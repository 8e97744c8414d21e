"""Flags in the browser without JavaScript's help: the comparison page's flag form (with htmx
and without, bad input kept, CSRF), My flags, the pair page's replies and resolving, the pairs
browser's Flags filter and the overview's count; who may reach each."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotation.flags.services import flag_raise, flag_reply
from annotation.models import Assignment, Flag, FlagComment, Skip
from annotation.queue.services.claim import assignment_claim
from tests.annotation.queue.conftest import SECRET_MODEL_A, secret_pair
from tests.factories import UserFactory

HTMX = {"HTTP_HX_REQUEST": "true"}
SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def lease(project, alice):
    secret_pair(project, 0)
    secret_pair(project, 1)
    return assignment_claim(project=project, annotator=alice)


def flag_url(project, lease) -> str:
    return reverse("annotate-flag", args=[project.slug, lease.pk])


def test_flag_from_the_comparison_page_keeps_the_pair(client_for, alice, project, lease):
    client = client_for(alice)
    page = client.get(reverse("annotate", args=[project.slug])).content.decode()
    assert 'name="kind" value="broken_media"' in page
    assert "Flag this pair <kbd>f</kbd>" in page
    assert "<td><kbd>f</kbd></td>" in page  # in the ? help
    response = client.post(flag_url(project, lease), {"kind": "identical", "note": ""}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Flagged: Both responses identical" in html
    assert reverse("annotate-vote", args=[project.slug, lease.pk]) in html  # the same pair
    assert Flag.objects.get().kind == "identical"
    lease.refresh_from_db()
    assert lease.status == Assignment.Status.LIVE


def test_flag_and_skip_without_htmx(client_for, alice, project, lease):
    response = client_for(alice).post(
        flag_url(project, lease), {"kind": "broken_media", "note": "black frames", "then": "skip"}
    )
    assert response.status_code == 302
    assert Skip.objects.get().reason == "broken"
    assert Flag.objects.get().note == "black frames"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"note": "KEEP-THIS-NOTE"}, "kind: This field is required."),
        ({"kind": "other", "note": ""}, "note: say what is wrong"),
        ({"kind": "nope", "note": "KEEP-THIS-NOTE"}, "kind: Select a valid choice."),
    ],
)
def test_a_bad_flag_is_refused_and_loses_nothing(client_for, alice, project, lease, data, message):
    response = client_for(alice).post(flag_url(project, lease), data, **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    assert '<details class="wb-flag" data-flag open>' in html
    assert data["note"] in html
    assert not Flag.objects.exists()


def test_flag_posts_need_the_csrf_token(alice, project, lease):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(flag_url(project, lease), {"kind": "identical"}).status_code == 403
    assert not Flag.objects.exists()


def test_who_may_flag(client_for, project, lease, bob, carol, eve):
    for user, expected in ((eve, 404), (carol, 403), (bob, 404)):
        response = client_for(user).post(flag_url(project, lease), {"kind": "identical"})
        assert response.status_code == expected, user
    assert not Flag.objects.exists()


def test_my_flags_shows_mine_and_the_replies_escaped(client_for, alice, bob, carol, project, lease):
    flag, _ = flag_raise(assignment=lease, annotator=alice, kind="other", note=SCRIPT)
    flag_reply(flag=flag, author=carol, text=f"Thanks {SCRIPT}")
    bobs = assignment_claim(project=project, annotator=bob)
    flag_raise(assignment=bobs, annotator=bob, kind="identical", note="BOB-PRIVATE")
    client = client_for(alice)
    annotate = client.get(reverse("annotate", args=[project.slug])).content.decode()
    assert "My flags (1 answered)" in annotate
    html = client.get(reverse("annotate-flags", args=[project.slug])).content.decode()
    assert SCRIPT not in html
    assert "Thanks &lt;script&gt;" in html
    assert "Draw a lighthouse" in html
    for secret in ("BOB-PRIVATE", "bob", SECRET_MODEL_A):
        assert secret not in html


def test_who_may_see_my_flags(client_for, project, carol, eve):
    url = reverse("annotate-flags", args=[project.slug])
    assert client_for(eve).get(url).status_code == 404
    assert client_for(carol).get(url).status_code == 403


@pytest.fixture
def flag(lease, alice):
    return flag_raise(assignment=lease, annotator=alice, kind="other", note=SCRIPT)[0]


def reply_url(project, flag, pair_id=None) -> str:
    return reverse("pair-flag-reply", args=[project.slug, pair_id or flag.pair_id, flag.pk])


def test_curator_replies_and_resolves_on_the_pair_page(client_for, carol, project, flag):
    client = client_for(carol)
    page = reverse("pair", args=[project.slug, flag.pair_id])
    html = client.get(page).content.decode()
    assert SCRIPT not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Reply and resolve" in html
    response = client.post(reply_url(project, flag), {"text": "Looking into it"})
    assert response.status_code == 302
    assert response["Location"].endswith("#flags")
    resolve = reverse("pair-flag-resolve", args=[project.slug, flag.pair_id, flag.pk])
    assert client.post(resolve).status_code == 302
    flag.refresh_from_db()
    assert flag.resolved_by == carol
    html = client.get(page).content.decode()
    assert "Looking into it" in html
    assert "resolved" in html


def test_a_bad_reply_is_refused_and_kept(client_for, carol, project, flag):
    too_long = "KEEP" + "x" * 5000
    response = client_for(carol).post(reply_url(project, flag), {"text": too_long})
    assert response.status_code == 400
    html = response.content.decode()
    assert "text: Ensure this value has at most 5000 characters" in html
    assert too_long in html
    empty = client_for(carol).post(reply_url(project, flag), {"text": "   "})
    assert empty.status_code == 400
    assert "text: This field is required." in empty.content.decode()
    assert not FlagComment.objects.exists()


def test_who_may_reply_and_resolve(client_for, project, flag, alice, dave, eve, carol):
    resolve = reverse("pair-flag-resolve", args=[project.slug, flag.pair_id, flag.pk])
    for user, expected in ((eve, 404), (alice, 403), (dave, 403)):
        client = client_for(user)
        assert client.post(reply_url(project, flag), {"text": "hi"}).status_code == expected
        assert client.post(resolve).status_code == expected
    # Researchers read the flags, without the curators' forms.
    html = client_for(dave).get(reverse("pair", args=[project.slug, flag.pair_id])).content
    assert b"&lt;script&gt;" in html
    assert b"Reply and resolve" not in html
    # A flag through another pair's URL.
    other_pair = flag.pair.project.pairs.exclude(pk=flag.pair_id).first()
    wrong = reply_url(project, flag, pair_id=other_pair.pk)
    assert client_for(carol).post(wrong, {"text": "hi"}).status_code == 404
    flag.refresh_from_db()
    assert flag.is_open
    assert not FlagComment.objects.exists()


def test_pairs_browser_flags_filter_and_overview_count(client_for, carol, project, flag):
    client = client_for(carol)
    url = reverse("pairs", args=[project.slug])
    # The claim order is the annotator's own: the flagged pair is either one.
    flagged_id = flag.pair.external_id
    other_id = flag.pair.project.pairs.exclude(pk=flag.pair_id).get().external_id
    flagged = client.get(url, {"flags": "open"}).content.decode()
    assert "1 flagged" in flagged
    assert f">{flagged_id}</a>" in flagged
    assert f">{other_id}</a>" not in flagged
    unflagged = client.get(url, {"flags": "none"}).content.decode()
    assert f">{other_id}</a>" in unflagged
    assert f">{flagged_id}</a>" not in unflagged
    bad = client.get(url, {"flags": "maybe"})
    assert bad.status_code == 400
    assert "Select a valid choice" in bad.content.decode()
    overview = client.get(reverse("project-detail", args=[project.slug])).content.decode()
    assert 'data-open-flags="1"' in overview
    assert "?flags=open" in overview


def test_operators_read_flags_in_the_admin(client, flag):
    client.force_login(UserFactory(username="root", is_superuser=True, is_staff=True))
    listing = client.get(reverse("admin:annotation_flag_changelist"))
    assert listing.status_code == 200
    assert "Other (say what in the note)" in listing.content.decode()
    assert client.get(reverse("admin:annotation_flag_add")).status_code == 403
