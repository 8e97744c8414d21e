"""The pairs browser: who may see it and act from it, its filters, sorts and keyset pages (a
fixed number of queries however deep or long the page), and each bulk action through POST."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from annotation.core.content import image_part, text_part
from annotation.core.media_keys import media_path
from annotation.models import PairRestriction, PairStatus, Skip
from annotation.pairs.selectors import PairFilters, cursor_encode, pairs_browse
from judges.models import FilterRun
from tests.annotation.queue.conftest import make_image, secret_pair
from tests.annotation.queue.test_workbench_page import assert_csp_clean
from tests.factories import PairFactory, make_prompt
from tests.judges.scripted import (  # noqa: F401 - celery_eager is a fixture
    canonical,
    celery_eager,
    make_judges,
    use_scripted_judges,
)


def browser_url(project, **query) -> str:
    url = reverse("pairs", args=[project.slug])
    return f"{url}?{'&'.join(f'{k}={v}' for k, v in query.items())}" if query else url


def bulk_url(project, action: str) -> str:
    return reverse("pairs-bulk", args=[project.slug, action])


def shown_ids(response) -> list[str]:
    """The pair ids in the table, in order."""
    html = response.content.decode()
    return re.findall(r'<a href="/p/[^/]+/pairs/\d+/[^"]*">([^<]+)</a>', html)


def link(response, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" hx-get="[^"]+" rel="{rel}">', response.content.decode())
    return unescape(found.group(1)) if found else None


@pytest.fixture
def many(project, alice):
    """30 pairs: p00..p29 in import order; even ones queued, the rest imported; every third
    one of task t2i with a criterion; p05 is gold, p07 skipped, p10 has 2 votes."""
    pairs = []
    for n in range(30):
        pairs.append(
            PairFactory(
                project=project,
                external_id=f"p{n:02d}",
                status=PairStatus.QUEUED if n % 2 == 0 else PairStatus.IMPORTED,
                task="t2i" if n % 3 == 0 else "edit",
                criterion="judge the text" if n % 3 == 0 else "",
                prompt=make_prompt(
                    project, f"Prompt number {n} about {'cats' if n < 5 else 'dogs'}"
                ),
                ensemble_agreement=n / 30 if n >= 20 else None,
                ensemble_label="A" if n >= 20 else "",
            )
        )
    pairs[5].is_gold, pairs[5].gold_label = True, "B"
    pairs[5].save(update_fields=["is_gold", "gold_label"])
    pairs[10].vote_count = 2
    pairs[10].save(update_fields=["vote_count"])
    Skip.objects.create(pair=pairs[7], annotator=alice, reason="broken")
    return pairs


def test_who_may_see_the_browser(client_for, alice, carol, dave, eve, project, many):
    url = browser_url(project)
    assert client_for(eve).get(url).status_code == 404
    assert client_for(alice).get(url).status_code == 403
    researcher = client_for(dave).get(url)
    assert researcher.status_code == 200
    # Researchers read; the bulk actions are the curators'.
    assert 'id="bulk-form"' not in researcher.content.decode()
    assert 'name="pair"' not in researcher.content.decode()
    curator = client_for(carol).get(url)
    assert curator.status_code == 200
    assert 'id="bulk-form"' in curator.content.decode()
    assert_csp_clean(curator.content.decode())


def test_anonymous_visitors_are_sent_to_log_in(client, project):
    response = client.get(browser_url(project))
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_the_project_page_links_the_browser_for_staff_only(client_for, alice, carol, project):
    pairs_link = f'href="{browser_url(project)}"'
    detail = reverse("project-detail", args=[project.slug])
    assert pairs_link in client_for(carol).get(detail).content.decode()
    assert pairs_link not in client_for(alice).get(detail).content.decode()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"status": "queued"}, [f"p{n:02d}" for n in range(0, 30, 2)]),
        ({"task": "t2i", "status": "imported"}, ["p03", "p09", "p15", "p21", "p27"]),
        ({"criterion": "no", "votes_min": "1"}, ["p10"]),
        ({"gold": "yes"}, ["p05"]),
        ({"skipped": "yes"}, ["p07"]),
        ({"ensemble": "none", "votes_min": "2"}, ["p10"]),
        ({"ensemble": "A", "agreement_min": "0.9"}, ["p27", "p28", "p29"]),
        ({"agreement_max": "0.7"}, ["p20", "p21"]),
        ({"q": "CATS"}, ["p00", "p01", "p02", "p03", "p04"]),
        ({"q": "p1"}, [f"p1{n}" for n in range(10)]),
        ({"q": "%"}, []),
    ],
)
def test_filters(client_for, carol, project, many, query, expected):
    response = client_for(carol).get(browser_url(project, per_page=100, **query))
    assert response.status_code == 200
    assert shown_ids(response) == expected
    assert f'data-count="total">{len(expected)}<' in response.content.decode()


def test_search_reads_text_parts_not_image_hashes_or_json_keys(client_for, carol, project):
    sha256 = make_image(project, (1, 2, 3))
    content = [text_part("A lighthouse"), image_part(sha256)]
    PairFactory(project=project, external_id="img", prompt=make_prompt(project, "", content))
    client = client_for(carol)
    assert shown_ids(client.get(browser_url(project, q="lighthouse"))) == ["img"]
    assert shown_ids(client.get(browser_url(project, q=sha256[:12]))) == []
    assert shown_ids(client.get(browser_url(project, q="type"))) == []
    page = client.get(browser_url(project)).content.decode()
    assert f'src="{media_path(slug=project.slug, sha256=sha256)}"' in page  # the thumbnail


def test_counts_per_status_follow_the_other_filters(client_for, carol, project, many):
    html = client_for(carol).get(browser_url(project, task="t2i", status="queued")).content.decode()
    # t2i: p00, p03, ..., p27 (10 pairs), 5 queued and 5 imported; the table shows the queued.
    assert 'data-count="queued">5<' in html
    assert 'data-count="imported">5<' in html
    assert 'data-count="total">5<' in html


def test_sorting_and_a_sort_outside_the_whitelist(client_for, carol, project, many):
    client = client_for(carol)
    by_votes = shown_ids(client.get(browser_url(project, sort="-votes", per_page=25)))
    assert by_votes[0] == "p10"
    by_agreement = shown_ids(client.get(browser_url(project, sort="-agreement", per_page=25)))
    assert by_agreement[:3] == ["p29", "p28", "p27"]
    by_status = shown_ids(client.get(browser_url(project, sort="status", per_page=25)))
    assert by_status[:15] == [f"p{n:02d}" for n in range(1, 30, 2)]  # imported before queued
    response = client.get(browser_url(project, sort="prompt__content"))
    assert response.status_code == 400
    assert "sort: Select a valid choice" in unescape(response.content.decode())


def test_bad_filter_values_are_refused_naming_the_field(client_for, carol, project, many):
    client = client_for(carol)
    for query, field in (
        ({"votes_min": "many"}, "votes_min"),
        ({"agreement_min": "0.9", "agreement_max": "0.1"}, "agreement_max"),
        ({"after": "not-a-cursor"}, "after"),
        ({"after": cursor_encode("text", 3)}, "after"),  # a cursor of another sort
        ({"task": "no-such-task"}, "task"),
    ):
        response = client.get(browser_url(project, **query))
        assert response.status_code == 400, query
        assert f"{field}:" in unescape(response.content.decode()), query


def test_keyset_pages_walk_forward_and_back(client_for, carol, project, many):
    client = client_for(carol)
    seen: list[str] = []
    url: str | None = browser_url(project, per_page=25, sort="-task", status="imported")
    pages = []
    while url:
        response = client.get(url)
        pages.append(url)
        seen += shown_ids(response)
        url = link(response, "next")
    assert len(pages) == 1  # 15 imported pairs fit one page of 25
    expected = sorted(
        (p for p in many if p.status == PairStatus.IMPORTED),
        key=lambda p: (p.task, p.pk),
        reverse=True,
    )
    assert seen == [p.external_id for p in expected]

    forward, url = [], browser_url(project, per_page=25)
    response = client.get(url)
    forward.append(shown_ids(response))
    next_url = link(response, "next")
    assert next_url
    assert link(response, "prev") is None
    second = client.get(next_url)
    assert shown_ids(second) == [f"p{n:02d}" for n in range(25, 30)]
    assert link(second, "next") is None
    back = client.get(link(second, "prev"))
    assert shown_ids(back) == forward[0] == [f"p{n:02d}" for n in range(25)]
    # The URL holds the whole view: the filter survives paging.
    assert dict(parse_qsl(urlsplit(next_url).query))["per_page"] == "25"


def test_query_count_does_not_grow_with_page_size_or_depth(
    client_for, carol, project, many, django_assert_max_num_queries
):
    client = client_for(carol)
    client.get(browser_url(project))  # the session and the first-request work
    with django_assert_max_num_queries(8) as small:
        response = client.get(browser_url(project, per_page=25))
    deep_url = link(response, "next")
    with django_assert_max_num_queries(len(small)) as deep:
        client.get(deep_url)
    with django_assert_max_num_queries(len(small)):
        client.get(browser_url(project, per_page=100, q="dogs", skipped="no", sort="-agreement"))
    assert len(deep) == len(small)


def test_selector_query_count_is_two(project, many, django_assert_num_queries):
    with django_assert_num_queries(2):
        page = pairs_browse(project=project, filters=PairFilters(), limit=200)
    assert len(page.rows) == 30
    with django_assert_num_queries(2):
        pairs_browse(project=project, filters=PairFilters(), after=page.prev_cursor, limit=3)


def test_htmx_gets_only_the_results(client_for, carol, project, many):
    response = client_for(carol).get(browser_url(project, status="queued"), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="pairs-results"')
    assert "<html" not in html
    assert 'class="pairs-filters' not in html
    assert response["Vary"]
    assert "HX-Request" in response["Vary"]


def test_pair_content_and_criterion_are_escaped(client_for, carol, project):
    hostile = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    PairFactory(
        project=project,
        external_id='"><script>alert(3)</script>',
        prompt=make_prompt(project, hostile),
        criterion=hostile,
        task="t2i",
    )
    html = client_for(carol).get(browser_url(project, q="script")).content.decode()
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&quot;&gt;&lt;script&gt;alert(3)" in html


# ---- Bulk actions ----


def post_bulk(client, project, action: str, **data):
    return client.post(bulk_url(project, action), data)


def test_enqueue_checked_pairs(client_for, carol, project, many):
    chosen = [many[1].pk, many[3].pk, many[4].pk]  # p04 is queued already
    response = post_bulk(client_for(carol), project, "enqueue", pair=chosen, status="imported")
    assert response.status_code == 302
    assert response["Location"] == browser_url(project, status="imported")
    statuses = {p.external_id: p.status for p in type(many[0]).objects.filter(pk__in=chosen)}
    assert statuses == {"p01": "queued", "p03": "queued", "p04": "queued"}
    page = client_for(carol).get(response["Location"]).content.decode()
    assert "Sent 2 imported pairs to the annotators&#x27; queue (of 3 chosen)." in page


def test_priority_on_all_pairs_matching_the_filter(client_for, carol, project, many):
    response = post_bulk(
        client_for(carol), project, "priority", all_matching="on", task="t2i", priority="7"
    )
    assert response.status_code == 302
    pairs = type(many[0]).objects.filter(project=project)
    assert set(pairs.filter(priority=7).values_list("task", flat=True)) == {"t2i"}
    assert pairs.filter(priority=7).count() == 10


def test_restrict_and_lift(client_for, alice, bob, carol, project, many):
    client = client_for(carol)
    chosen = [many[0].pk, many[2].pk]
    response = post_bulk(client, project, "restrict", pair=chosen, annotators=[bob.pk])
    assert response.status_code == 302
    assert set(PairRestriction.objects.values_list("pair_id", "annotator_id")) == {
        (chosen[0], bob.pk),
        (chosen[1], bob.pk),
    }
    post_bulk(client, project, "restrict", pair=chosen)
    assert not PairRestriction.objects.exists()
    assert not type(many[0]).objects.filter(restricted=True).exists()


def test_mark_checked_pairs_gold_and_make_them_ordinary_again(client_for, carol, project, many):
    client = client_for(carol)
    chosen = [many[0].pk, many[2].pk]
    response = post_bulk(client, project, "gold", pair=chosen, label="B")
    assert response.status_code == 302
    pairs = type(many[0]).objects.filter(pk__in=chosen)
    assert set(pairs.values_list("is_gold", "gold_label")) == {(True, "B")}
    page = client.get(response["Location"]).content.decode()
    assert "2 gold pairs with the answer B." in page
    assert post_bulk(client, project, "gold", pair=chosen, label="clear").status_code == 302
    assert set(pairs.values_list("is_gold", "gold_label")) == {(False, "")}


def test_gold_labels_follow_the_scale(client_for, carol, project, many):
    project.scale = "binary"
    project.save(update_fields=["scale"])
    response = post_bulk(client_for(carol), project, "gold", pair=[many[0].pk], label="tie")
    assert response.status_code == 400
    assert "label: Select a valid choice" in unescape(response.content.decode())
    many[0].refresh_from_db()
    assert not many[0].is_gold


def test_bulk_refusals_name_the_field(client_for, carol, eve, project, other_project, many):
    client = client_for(carol)
    foreign = PairFactory(project=other_project)
    for data, message in (
        ({}, "pair: choose at least one pair"),
        ({"pair": [foreign.pk]}, f"pair: no pair {foreign.pk} in this project"),
        ({"pair": [many[0].pk], "priority": "5000"}, "priority: Ensure this value is less"),
        ({"pair": ["x"]}, "pair: Pair ids are numbers"),
    ):
        response = post_bulk(client, project, "priority", **{"priority": "1", **data})
        assert response.status_code == 400, data
        assert message in unescape(response.content.decode()), data
    assert not type(many[0]).objects.exclude(priority=0).exists()
    assert post_bulk(client, project, "no-such-action", pair=[many[0].pk]).status_code == 404


def test_all_matching_is_capped(client_for, carol, project, many, monkeypatch):
    monkeypatch.setattr("annotation.pairs.views.MAX_PAIR_IDS", 5)
    response = post_bulk(client_for(carol), project, "enqueue", all_matching="on")
    assert response.status_code == 400
    assert "all_matching: more than 5 pairs match" in unescape(response.content.decode())
    assert type(many[0]).objects.filter(status=PairStatus.IMPORTED).count() == 15


@pytest.mark.parametrize("action", ["enqueue", "priority", "restrict", "gold"])
def test_bulk_actions_are_the_curators(client_for, alice, dave, eve, project, many, action):
    data = {"pair": [many[1].pk], "priority": "3", "label": "A"}
    assert post_bulk(client_for(eve), project, action, **data).status_code == 404
    assert post_bulk(client_for(alice), project, action, **data).status_code == 403
    assert post_bulk(client_for(dave), project, action, **data).status_code == 403
    many[1].refresh_from_db()
    assert (many[1].status, many[1].priority, many[1].is_gold) == (PairStatus.IMPORTED, 0, False)


def test_bulk_actions_need_the_csrf_token(carol, project, many):
    client = Client(enforce_csrf_checks=True)
    client.force_login(carol)
    client.get(browser_url(project))
    data = {"pair": [many[1].pk]}
    assert client.post(bulk_url(project, "enqueue"), data).status_code == 403
    many[1].refresh_from_db()
    assert many[1].status == PairStatus.IMPORTED
    token = client.cookies["csrftoken"].value
    response = client.post(bulk_url(project, "enqueue"), data, HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 302
    many[1].refresh_from_db()
    assert many[1].status == PairStatus.QUEUED


def test_secret_pair_fields_reach_staff_only_through_their_pages(client_for, carol, project):
    secret_pair(project, 1, with_images=True)
    html = client_for(carol).get(browser_url(project)).content.decode()
    assert "import-id-narwhal-1" in html


# ---- Send to judges ----


@pytest.fixture
def judge(monkeypatch, celery_eager):  # noqa: F811 - celery_eager is a fixture
    use_scripted_judges(monkeypatch, {"sharp-judge": canonical("A")})
    return make_judges("sharp-judge")[0]


def test_send_checked_pairs_to_judges(
    client_for, carol, project, many, judge, django_capture_on_commit_callbacks
):
    client = client_for(carol)
    runs_url = reverse("judges:runs-for-pairs", args=[project.slug])
    chosen = [many[1].pk, many[3].pk, many[4].pk]  # p04 is queued: not judged
    form = client.post(runs_url, {"pair": chosen, "task": "edit"})
    assert form.status_code == 200
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", form.content.decode())).split())
    assert "3 pairs chosen in the pairs browser; 2 of them imported" in text
    assert not FilterRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(
            runs_url,
            {
                "pair": chosen,
                "task": "edit",
                "start": "1",
                "judges": [judge.pk],
                "threshold": "0.9",
            },
        )
    run = FilterRun.objects.get()
    assert started.status_code == 302
    assert started["Location"].endswith(f"/filter-runs/{run.number}/")
    assert set(run.pairs.values_list("pk", flat=True)) == {many[1].pk, many[3].pk}


def test_send_all_matching_to_judges(
    client_for, carol, project, many, judge, django_capture_on_commit_callbacks
):
    runs_url = reverse("judges:runs-for-pairs", args=[project.slug])
    data = {
        "all_matching": "on",
        "task": "t2i",
        "status": "imported",
        "start": "1",
        "threshold": "0.9",
    }
    with django_capture_on_commit_callbacks(execute=True):
        client_for(carol).post(runs_url, {**data, "judges": [judge.pk]})
    judged = set(FilterRun.objects.get().pairs.values_list("external_id", flat=True))
    assert judged == {"p03", "p09", "p15", "p21", "p27"}


def test_send_to_judges_is_the_curators(client_for, alice, dave, eve, carol, project, many):
    runs_url = reverse("judges:runs-for-pairs", args=[project.slug])
    data = {"pair": [many[1].pk]}
    assert client_for(eve).post(runs_url, data).status_code == 404
    assert client_for(alice).post(runs_url, data).status_code == 403
    assert client_for(dave).post(runs_url, data).status_code == 403
    assert client_for(carol).get(runs_url).status_code == 405
    empty = client_for(carol).post(runs_url, {"task": "edit"})
    assert empty.status_code == 302
    assert empty["Location"] == browser_url(project, task="edit")
