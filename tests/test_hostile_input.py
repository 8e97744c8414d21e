"""Input any client can send never makes a 500 (docs/api.md, "Errors"): every endpoint of the
URL resolver, the REST API's fields from its OpenAPI schema and every form the pages render,
sent as a user allowed to use them, with deep nesting, NUL, lone surrogates, numbers no
column or double holds, hostile page cursors and ``Range`` headers. Each request runs in a
savepoint rolled back after it, so one request's change never decides the next one's answer.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urlencode, urlsplit

import pytest
from django.core.signals import got_request_exception
from django.db import transaction
from django.test import Client
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from drf_spectacular.generators import SchemaGenerator
from rest_framework.authtoken.models import Token

from annotation.agreement.views.report import CHARTS, TABLES
from annotation.core.media_keys import media_url_key
from annotation.flags.services import flag_raise
from annotation.models import (
    ApiToken,
    Assignment,
    ImportJob,
    ProjectMedia,
    Release,
    WebhookEndpoint,
)
from annotation.models.choices import FlagKind
from annotation.pairs.views import BULK_ACTIONS
from annotation.projects.invitations import invitation_create, invitation_token
from annotation.queue.services import claim as queue_claim
from annotation.queue.views.curator import ACTIONS
from annotation.webhooks.services import webhook_test
from judges.best_of_n.services import best_of_n_run
from judges.evaluation.services import judge_evaluation_create
from judges.models import TrainingRun
from tests.annotation.releases.conftest import built_release, releasable_project
from tests.factories import FilterRunFactory, JudgeFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

# Logging out would end the session the rest of the walk runs in.
SKIPPED_ROUTES = {"logout/"}
DEEP = "[" * 1100 + "]" * 1100
NESTED_70 = "[" * 70 + "]" * 70
DIGITS = "9" * 5000
# JSON texts the parser refuses, each for its own reason.
REFUSED_JSON = {
    "deep": DEEP,
    "deep-in-a-field": '{"items": ' + DEEP + ', "selection": ' + DEEP + "}",
    "nested-70": '{"items": ' + NESTED_70 + "}",
    "nul": '{"x": "a\\u0000b"}',
    "surrogate": '{"x": "\\ud800"}',
    "digits": '{"x": ' + DIGITS + "}",
    "overflow": '{"x": 1e400}',
}
# JSON values the parser takes, put into one field at a time.
# "1.1000000000.0": a version part longer than the URL converter takes (issue 16, item 12).
FIELD_VALUES = [2147483648, 2**63, -1, 1e300, "x" * 10_000, [[["x"]]], {}, None, "1.1000000000.0"]
LONE_SURROGATE = b"\xed\xa0\x80"  # U+D800 as UTF-8 would write it, which UTF-8 forbids
# Form and query values, each into one field at a time; the others into all of them at once.
TEXTS: list[str | bytes] = ["a\x00b", DIGITS]
MORE_TEXTS: list[str | bytes] = [
    "2147483648",
    LONE_SURROGATE,
    "-1",
    "1e400",
    "9223372036854775808",
    "\ufffd",
    "",
]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


CURSORS = [
    _b64(b'["a\\u0000b", 1]'),
    _b64(b"[" * 1100 + b"]" * 1100),
    _b64(b'["\\ud800", 1]'),
    _b64(b"[" + DIGITS.encode() + b", 1]"),
    _b64(b"[1, 1e400]"),
    "a\x00b",
    "!!!",
]
JUDGEMENT_LINES = {
    "nul": '{"pair": "rel-00\\u0000", "order": "AB", "verdict": "A"}',
    "surrogate": '{"pair": "\\ud800", "order": "AB", "verdict": "A"}',
    "digits": '{"pair": "rel-00", "order": "AB", "score": ' + DIGITS + "}",
    "huge": '{"pair": "rel-00", "order": "AB", "score": 1e400}',
    "huge-int": '{"pair": ' + "9" * 400 + ', "order": "AB", "verdict": "A"}',
    "big-confidence": '{"pair": "rel-00", "order": "AB", "verdict": "A", "confidence": 1e308}',
    "deep": '{"pair": "rel-00", "order": "AB", "verdict": ' + DEEP + "}",
}


@dataclass
class Form:
    action: str
    method: str
    fields: dict[str, str] = field(default_factory=dict)


class _FormFinder(HTMLParser):
    """Every form on a page with the values it would post as rendered."""

    def __init__(self, page_url: str) -> None:
        super().__init__()
        self.page_url = page_url
        self.forms: list[Form] = []
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "form":
            action = attributes.get("action") or self.page_url
            method = (attributes.get("method") or "get").lower()
            self.forms.append(Form(urlsplit(action).path or self.page_url, method))
            return
        if not self.forms:
            return
        fields = self.forms[-1].fields
        if tag == "option" and self._select:
            if "selected" in attributes or not fields.get(self._select):
                fields[self._select] = attributes.get("value") or ""
            return
        if not (name := attributes.get("name")):
            return
        if tag == "input":
            kind = attributes.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in attributes:
                fields.setdefault(name, "")
            elif kind not in ("submit", "button", "file"):
                fields[name] = attributes.get("value") or ""
        elif tag == "select":
            self._select = name
            fields.setdefault(name, "")
        elif tag == "textarea":
            self._textarea = name
            fields[name] = ""

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea and self.forms:
            self.forms[-1].fields[self._textarea] += data


def _patterns(resolvers, prefix: str = ""):
    """The route of every endpoint the resolver knows, the admin's left out."""
    for entry in resolvers:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if route.startswith("admin/"):
                continue
            yield from _patterns(entry.url_patterns, route)
        elif isinstance(entry, URLPattern):
            yield route


class World:
    """The objects every path parameter names, and clients for the people allowed."""

    def __init__(self, project, alice, bob, carol, dave) -> None:
        releasable_project(project, alice, bob, carol)
        self.project = project
        self.release = built_release(project, carol, "1.0.0")
        self.judge = JudgeFactory(name="offline", kind="scores")
        self.run = FilterRunFactory(project=project, number=1, created_by=carol)
        self.run.judges.set([self.judge])
        self.evaluation = judge_evaluation_create(
            judge=self.judge, project=project, call=False, created_by=carol
        )
        self.training = TrainingRun.objects.create(
            project=project, epochs=1, lr=0.01, batch_size=8, seed=0, patience=1, holdout=0.2
        )
        self.job = ImportJob.objects.create(project=project, created_by=carol, filename="x.jsonl")
        self.best_of_n = best_of_n_run(
            project=project, judge=self.judge, items=[], method="scores", created_by=carol
        )
        self.assignment = queue_claim.assignment_claim(project=project, annotator=alice)
        assert isinstance(self.assignment, Assignment)
        self.flag, _ = flag_raise(
            assignment=self.assignment, annotator=alice, kind=FlagKind.values[0]
        )
        self.extra = MembershipFactory(project=project, user=UserFactory(username="zed"))
        self.invitation = invitation_create(
            project=project, email="invited@example.org", role="annotator", invited_by=carol
        )
        self.pair = project.pairs.get(external_id="rel-disputed")
        self.media = ProjectMedia.objects.filter(project=project).first().media_id
        self.file_name = "manifest.json"
        self.api_token = ApiToken.objects.create(
            user=carol, name="hostile", key_digest="f" * 64, key_start="arb_hostile"
        )
        self.webhook = WebhookEndpoint.objects.create(
            project=project, url="http://127.0.0.1:9/hook", events=["pair.decided"], secret="x"
        )
        self.delivery = webhook_test(endpoint=self.webhook)
        self.users = {"curator": carol, "annotator": alice, "researcher": dave}
        self.clients: dict[str, Client] = {}
        self.apis: dict[str, Client] = {}
        for role, user in self.users.items():
            client = Client(raise_request_exception=False)
            client.force_login(user)
            self.clients[role] = client
            token, _ = Token.objects.get_or_create(user=user)
            self.apis[role] = Client(
                raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token.key}"
            )

    def role_for(self, route: str) -> str:
        annotating = ("annotate", "claim/", "undo/", "assignments/", "/me/", "/history/")
        return "annotator" if any(word in route for word in annotating) else "curator"

    def values(self, route: str, name: str) -> list[str]:
        """What a path parameter takes: the real object's, for each name the view knows."""
        if name == "slug":
            return [self.project.slug]
        if name == "version":
            return [self.release.version]
        if (name in ("pk", "webhook_id") and "webhooks" in route) or name == "delivery_id":
            return [str((self.delivery if name == "delivery_id" else self.webhook).pk)]
        if name in ("pk", "assignment_id") and ("assignments" in route or "annotate" in route):
            return [str(self.assignment.pk)]
        if name in ("pk", "job_id"):
            return [str(self.job.pk)]
        if name == "judge_id":
            return [str(self.judge.pk)]
        if name == "run_id" and "best-of-n" in route:
            return [str(self.best_of_n.pk)]
        if name == "fmt":
            return ["json", "csv", "nope"]
        if name == "number":  # a filter run's, by its number in the project
            return [str(self.run.number)]
        if name == "run_id":
            training = "training" in route or "reward-models" in route
            return [str((self.training if training else self.run).pk)]
        if name == "evaluation_id":
            return [str(self.evaluation.pk)]
        if name == "pair_id" and "flags" in route:  # the flag's own pair
            return [str(self.flag.pair_id)]
        if name == "pair_id":
            return [str(self.pair.pk)]
        if name == "flag_id":
            return [str(self.flag.pk)]
        if name == "external_id":
            return [self.pair.external_id]
        if name == "token_id":
            return [str(self.api_token.pk)]
        if name == "membership_id":
            return [str(self.extra.pk)]
        if name == "media_key":
            return [media_url_key(self.media)]
        if name == "name":
            return [self.file_name]
        if name == "username":
            return ["alice"]
        if name == "chart":
            return [spec.name for spec in CHARTS] + list(TABLES)
        if name == "action" and "webhooks" in route:
            return ["test", "rotate", "nope"]
        if name == "invitation_id":
            return [str(self.invitation.pk)]
        if name == "token":  # an invitation's or a password reset's
            return [invitation_token(self.invitation), "forged:token"]
        if name == "uidb64":
            return [urlsafe_base64_encode(force_bytes(self.users["curator"].pk)), "!!"]
        if name == "action" and "invitations" in route:
            return ["resend", "revoke", "nope"]
        if name == "action" and "/runs/" in route:  # a filter run's old URLs, by id
            return ["cancel", "resume", "nope"]
        if name == "action":
            return list(BULK_ACTIONS if "bulk" in route else ACTIONS)
        if name == "unmatched":
            return ["nowhere"]
        if name == "provider_id":  # single sign-on's, configured or not (docs/sso.md)
            return ["sso", "nope"]
        raise AssertionError(f"no value for <{name}> in {route}")


_PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")


def _urls(world: World, route: str) -> list[str]:
    """The route with its parameters filled, once for each value ``world`` has for them."""
    if route.startswith("^"):  # the API's catch-all for paths that name no endpoint
        return ["/api/nowhere"]
    urls = [route]
    for match in _PARAMETER.finditer(route):
        values = world.values(route, match.group(1))
        urls = [url.replace(match.group(0), value, 1) for url in urls for value in values]
    return ["/" + url for url in urls]


class Prober:
    """Sends each request in a rolled-back savepoint and keeps every 5xx with its cause."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.sent = 0
        self._cause: list[str] = []
        got_request_exception.connect(self._caught)

    def _caught(self, sender, request, **kwargs):
        import sys

        exc = sys.exc_info()[1]
        self._cause.append(f"{type(exc).__name__}: {str(exc)[:160]}")

    def send(self, client: Client, method: str, url: str, what: str, **kwargs):
        self._cause.clear()
        self.sent += 1
        savepoint = transaction.savepoint()
        cookies = copy.deepcopy(client.cookies)  # a session the rollback takes back
        try:
            response = getattr(client, method)(url, **kwargs)
        finally:
            transaction.savepoint_rollback(savepoint)
            client.cookies = cookies
        if response.status_code >= 500 and response.status_code != 503:
            cause = "; ".join(self._cause) or "no exception"
            self.failures.append(
                f"{method.upper()} {url[:120]!r} {what}: {response.status_code} {cause}"
            )
        elif response.status_code in (400, 404, 409):
            body = b"".join(response.streaming_content) if response.streaming else response.content
            if not body.strip():
                self.failures.append(
                    f"{method.upper()} {url[:120]!r} {what}: empty {response.status_code}"
                )
        return response

    def close(self) -> None:
        got_request_exception.disconnect(self._caught)


def _schema_fields():
    """(path template, method) -> (body field names, query parameter names), from OpenAPI."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema.get("components", {}).get("schemas", {})
    found = {}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            body_fields: set[str] = set()
            for content in operation.get("requestBody", {}).get("content", {}).values():
                ref = content.get("schema", {}).get("$ref", "")
                body = components.get(ref.rsplit("/", 1)[-1], content.get("schema", {}))
                body_fields |= set(body.get("properties", {}))
            query = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            found[(path, method)] = (body_fields, query)
    return found


# Bodies that pass validation on the endpoints whose services most need hostile values to
# reach them: each hostile field value is sent on top of these.
def _base_bodies(world: World) -> dict[str, dict]:
    return {
        "releases/": {"version": "9.9.9"},
        "best-of-n/": {
            "judge": "offline",
            "items": [
                {
                    "id": "p",
                    "prompt": "x",
                    "candidates": [{"id": "a", "content": "1"}, {"id": "b", "content": "2"}],
                }
            ],
        },
        "judge-evaluations/": {"judge": "offline"},
        "training-runs/": {"features": "hashed"},
        "filter-runs/": {"judges": ["offline"]},
        "vote/": {"choice": "left"},
        "skip/": {"reason": "unclear"},
        "adjudicate/": {"label": "A", "note": "because"},
    }


def _base_for(route: str, bases: dict[str, dict]) -> dict:
    for suffix, body in bases.items():
        if route.endswith(suffix):
            return body
    return {}


@pytest.fixture
def world(project, alice, bob, carol, dave, settings):
    settings.ARBITER_SYNC_IMPORT_MAX_BYTES = 10**6
    return World(project, alice, bob, carol, dave)


def test_no_hostile_input_to_any_endpoint_or_form_makes_a_500(world):
    prober = Prober()
    schema = _schema_fields()
    bases = _base_bodies(world)
    routes = list(_patterns(get_resolver().url_patterns))
    assert len(routes) > 60  # the walk found the app's endpoints, not an empty resolver
    forms: dict[tuple[str, str], Form] = {}
    try:
        for route in routes:
            is_api = route.startswith("api/")
            role = world.role_for(route)
            client = (world.apis if is_api else world.clients)[role]
            if route in SKIPPED_ROUTES:
                continue
            for url in _urls(world, route):
                response = prober.send(client, "get", url, "as is")
                if not is_api and response.get("Content-Type", "").startswith("text/html"):
                    finder = _FormFinder(url)
                    finder.feed(response.content.decode())
                    for form in finder.forms:
                        # One form per endpoint: a member's role form stands for every one.
                        key = (form.method, _endpoint(form.action))
                        known = forms.setdefault(key, form)
                        if known.action == form.action:
                            known.fields = {**form.fields, **known.fields}
                if "download" in route or "files/" in route:
                    for header in (f"bytes={DIGITS}-", f"bytes=0-{DIGITS}", f"bytes=-{DIGITS}"):
                        prober.send(client, "get", url, f"Range {header[:12]}", HTTP_RANGE=header)
                template = "/" + route
                for (path, method), (body_fields, query) in schema.items():
                    if not _same_route(path, template):
                        continue
                    _probe_api(
                        prober, client, url, method, body_fields, query, _base_for(route, bases)
                    )
                if not is_api:
                    for text in TEXTS[:2]:
                        prober.send(client, "post", url, f"post {text[:8]!r}", data={"x": text})
                        query = urlencode({"q": text, "after": text, "source": text})
                        prober.send(client, "get", f"{url}?{query}", "query")
        for form in forms.values():
            _probe_form(prober, world, form)
        _probe_named_cases(prober, world)
    finally:
        prober.close()
    assert prober.sent > 800
    assert not prober.failures, "\n".join(prober.failures)


def _endpoint(path: str) -> str:
    """The name of the URL pattern ``path`` resolves to (the path itself when none)."""
    try:
        match = resolve(path)
    except Resolver404:
        return path
    return match.view_name or path


def _same_route(schema_path: str, template: str) -> bool:
    """Whether an OpenAPI path (``{slug}``) is this resolver route (``<slug:slug>``)."""
    return schema_path == _PARAMETER.sub(r"{\1}", template)


def _probe_api(prober, client, url, method, body_fields, query, base):
    if method == "get":
        for name in query | {"limit", "offset"}:
            for value in TEXTS[:2]:
                prober.send(client, "get", f"{url}?{urlencode({name: value})}", f"query {name}")
        query = urlencode(dict.fromkeys(query | {"limit", "offset"}, "9223372036854775808"))
        prober.send(client, "get", f"{url}?{query}", "query, all parameters")
        return
    send = lambda body, what: prober.send(  # noqa: E731
        client, method, url, what, data=body, content_type="application/json"
    )
    for name, text in REFUSED_JSON.items():
        send(text, name)
    for name in body_fields | set(base):
        for value in FIELD_VALUES:
            send(json.dumps({**base, name: value}), f"{name}={str(value)[:12]}")
    if body_fields:
        for value in FIELD_VALUES:
            send(json.dumps({**base, **dict.fromkeys(body_fields, value)}), "all fields")


def _probe_form(prober, world: World, form: Form) -> None:
    """The form as the page rendered it, with one field hostile at a time, then all."""
    client = world.clients[world.role_for(form.action)]

    def send(data: dict, what: str) -> None:
        if form.method == "post":
            prober.send(client, "post", form.action, what, data=data)
        else:
            prober.send(client, "get", f"{form.action}?{urlencode(data)}", what)

    for name in form.fields:
        for text in TEXTS:
            send({**form.fields, name: text}, f"form {name}={text[:8]!r}")
    for text in MORE_TEXTS + CURSORS[:2]:
        send(dict.fromkeys(form.fields, text), f"form, all fields {text[:8]!r}")


def _probe_named_cases(prober, world: World) -> None:
    """The inputs of the probe that found these, each as its tester sent it."""
    slug = world.project.slug
    page = world.clients["curator"]
    for cursor in CURSORS:
        for key, sort in (("after", "external_id"), ("before", "task"), ("after", "")):
            query = urlencode({key: cursor, "sort": sort})
            response = prober.send(page, "get", f"/p/{slug}/pairs/?{query}", "cursor")
            assert response.status_code in (200, 400), (cursor, response.status_code)
    for path in (f"/p/{slug}/pairs/id/%00", f"/p/{slug}/media/%00", f"/p/{slug}/pairs/id/a%00b"):
        response = prober.send(page, "get", path, "NUL in the path")
        assert response.status_code in (400, 404), (path, response.status_code)
    api = world.apis["curator"]
    seed = prober.send(
        api,
        "post",
        f"/api/v1/projects/{slug}/judge-evaluations/",
        "seed 2**31",
        data={"judge": "offline", "seed": 2147483648},
        content_type="application/json",
    )
    assert seed.status_code == 400, seed.content
    assert "seed" in seed.json(), seed.content
    for name, line in JUDGEMENT_LINES.items():
        upload = io.BytesIO(line.encode())
        upload.name = "answers.jsonl"
        response = prober.send(
            api,
            "post",
            f"/api/v1/projects/{slug}/judgements/import/",
            f"judgement line {name}",
            data={"judge": "offline", "file": upload},
        )
        assert response.status_code == 400, (name, response.content)
        assert "line 1:" in response.json()["detail"], (name, response.json())
    vote = prober.send(
        world.apis["annotator"],
        "post",
        f"/api/v1/assignments/{world.assignment.pk}/vote/",
        "deep vote",
        data='{"choice": ' + DEEP + "}",
        content_type="application/json",
    )
    assert vote.status_code == 400, vote.content
    assert "nested" in vote.json()["detail"], vote.content
    assert Release.objects.filter(project=world.project).count() == 1
