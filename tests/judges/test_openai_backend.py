"""The OpenAI-compatible judge against a loopback server answering by the test's rules."""

from __future__ import annotations

import base64
import io
import logging
import time

import pytest
from django.conf import settings
from django.core.management import call_command
from PIL import Image

from judges.backends import get_backend
from judges.backends.openai import ERROR_BODY_CHARS, OpenAIBackend
from judges.models import Judge, Verdict
from judges.runs.services import filter_run_create
from tests.factories import FilterRunFactory, JudgeFactory, PairFactory
from tests.judges.backend_helpers import image_part, item, noisy_image, store_image, text_part
from tests.judges.fake_openai import (
    FakeOpenAI,
    Reply,
    by_marker,
    malformed,
    per_item,
    sleep,
    status,
    verdict,
)
from tests.judges.scripted import celery_eager  # noqa: F401 - a fixture

KEY_ENV = "ARBITER_JUDGE_KEY_TEST"
SECRET = "sk-test-9f8e7d6c5b4a-DO-NOT-LEAK"


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def make_judge(db, server):
    def make(**fields) -> Judge:
        defaults = {
            "name": "fake-judge",
            "kind": "openai",
            "base_url": server.base_url,
            "model": "judge-model",
            "timeout_s": 5.0,
            "concurrency": 8,
            "options": {"retry_base_s": 0.01, "retry_max_s": 0.2},
        }
        return JudgeFactory(**{**defaults, **fields})

    return make


def judge_once(judge: Judge, items):
    backend = get_backend(judge)
    try:
        return backend.judge_batch(items)
    finally:
        backend.close()


def test_registry_gives_the_openai_backend(make_judge):
    assert isinstance(get_backend(make_judge()), OpenAIBackend)


def test_verdicts_map_back_to_the_better_response_in_both_orders(server, make_judge):
    server.reset(by_marker("GOOD"))
    good, plain = "A GOOD answer", "a plain answer"
    ab = item(good, plain, order="AB")  # A is shown first
    ba = item(plain, good, order="BA")  # B shown first, so A (the good one) is second
    results = judge_once(make_judge(), [ab, ba])
    assert [r.outcome for r in results] == ["ok", "ok"]
    assert [r.preferred for r in results] == ["first", "second"]
    assert [i.canonical_side(r.preferred) for i, r in zip([ab, ba], results, strict=True)] == [
        "A",
        "A",
    ]
    assert results[0].confidence == 0.9
    assert results[0].reasoning == "fake judge"


def test_the_request_carries_model_temperature_max_tokens_and_the_prompt(server, make_judge):
    judge = make_judge(temperature=0.3, max_tokens=77)
    judge_once(judge, [item("FIRST TEXT", "SECOND TEXT", criterion="only the spelling")])
    body = server.requests[0].body
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("judge-model", 0.3, 77)
    request = server.requests[0]
    assert "FIRST TEXT" in request.response_text(1)
    assert "SECOND TEXT" in request.response_text(2)
    assert "only the spelling" in request.text


def test_a_rubric_option_replaces_the_built_in_one(server, make_judge):
    judge = make_judge(options={"rubrics": {"t2i": "CUSTOM IMAGE RUBRIC"}})
    judge_once(judge, [item(task="t2i", pair_id=1), item(task="text", pair_id=2)])
    texts = sorted(r.text for r in server.requests)
    assert sum("CUSTOM IMAGE RUBRIC" in t for t in texts) == 1


def test_tie_is_offered_and_accepted_only_when_the_scale_has_one(server, make_judge):
    server.reset(verdict("tie"))
    judge = make_judge()
    with_tie, without_tie = judge_once(
        judge, [item(allow_tie=True, pair_id=1), item(allow_tie=False, pair_id=2)]
    )
    offered = sorted('"tie"' in r.text for r in server.requests)
    assert offered == [False, True]  # offered in one request only
    assert with_tie.outcome == "ok"
    assert with_tie.preferred == "tie"
    assert without_tie.outcome == "unparseable"
    assert without_tie.preferred is None


def test_images_go_as_data_urls_downscaled_only_when_too_large(server, make_judge):
    big = store_image(noisy_image(400, 200, seed=1), "PNG")
    small = store_image(noisy_image(60, 40, seed=2), "JPEG")
    prompt = [text_part("Edit this:"), image_part(small.sha256)]
    first = [image_part(big.sha256)]
    judge_once(make_judge(max_image_side=100), [item(first, "no image", prompt=prompt)])
    urls = server.requests[0].image_urls
    assert len(urls) == 2
    assert urls[0].startswith("data:image/jpeg;base64,")  # the prompt's image comes first
    original = (settings.MEDIA_ROOT / small.relative_path).read_bytes()
    assert base64.b64decode(urls[0].split(",", 1)[1]) == original  # sent unchanged
    assert urls[1].startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(urls[1].split(",", 1)[1]))) as sent:
        assert sent.size == (100, 50)


def test_a_missing_image_is_a_permanent_error_without_a_call(server, make_judge):
    results = judge_once(make_judge(), [item([image_part("0" * 64)], "text")])
    assert results[0].outcome == "error"
    assert not results[0].transient
    assert "not in the media store" in results[0].error
    assert server.request_count == 0


def test_malformed_answers_are_unparseable_and_kept(server, make_judge):
    server.reset(malformed("Honestly both are fine {oops"))
    (result,) = judge_once(make_judge(), [item()])
    assert result.outcome == "unparseable"
    assert result.raw == "Honestly both are fine {oops"
    assert result.preferred is None


def test_429_is_retried_honouring_retry_after_then_succeeds(server, make_judge):
    server.reset([status(429, retry_after="0"), verdict("2")])
    (result,) = judge_once(make_judge(concurrency=1), [item()])
    assert (result.outcome, result.preferred, result.attempts) == ("ok", "second", 2)
    assert server.request_count == 2


def test_retry_after_is_capped(server, make_judge):
    server.reset([status(429, retry_after="3600"), verdict("1")])
    judge = make_judge(options={"retry_base_s": 0.01, "retry_max_s": 0.3})
    started = time.monotonic()
    (result,) = judge_once(judge, [item()])
    elapsed = time.monotonic() - started
    assert result.outcome == "ok"
    assert 0.3 <= elapsed < 10  # waited as told, but not an hour


def test_transient_failures_are_retried_per_item(server, make_judge):
    server.reset(per_item([status(503), status(429)], then=verdict("1")))
    results = judge_once(make_judge(), [item(pair_id=n, first=f"answer {n}") for n in range(5)])
    assert {r.outcome for r in results} == {"ok"}
    assert {r.attempts for r in results} == {3}
    assert server.request_count == 15


def test_persistent_500_ends_as_a_transient_error(server, make_judge):
    server.reset(status(500, body="upstream exploded"))
    judge = make_judge(options={"max_retries": 2, "retry_base_s": 0.01})
    (result,) = judge_once(judge, [item()])
    assert result.outcome == "error"
    assert result.transient
    assert "HTTP 500" in result.error
    assert result.attempts == 3
    assert server.request_count == 3


def test_a_timeout_is_a_transient_error(server, make_judge):
    server.reset(sleep(1.5))
    judge = make_judge(timeout_s=0.2, options={"max_retries": 1, "retry_base_s": 0.01})
    (result,) = judge_once(judge, [item()])
    assert result.outcome == "error"
    assert result.transient
    assert "timed out" in result.error
    assert server.request_count == 2


def test_connection_refused_is_a_transient_error(make_judge):
    judge = make_judge(base_url="http://127.0.0.1:9/v1", options={"max_retries": 1})
    (result,) = judge_once(judge, [item()])
    assert result.outcome == "error"
    assert result.transient
    assert "connection error" in result.error


def test_400_is_a_permanent_error_without_retries(server, make_judge):
    server.reset(status(400, body='{"error": "model does not accept images"}'))
    (result,) = judge_once(make_judge(), [item()])
    assert result.outcome == "error"
    assert not result.transient
    assert "HTTP 400" in result.error
    assert "does not accept images" in result.error
    assert server.request_count == 1


def test_many_requests_are_in_flight_at_once(make_judge):
    with FakeOpenAI(verdict("1"), delay_s=0.2) as slow:
        judge = make_judge(base_url=slow.base_url, concurrency=16)
        results = judge_once(judge, [item(pair_id=n, first=f"answer {n}") for n in range(48)])
        assert {r.outcome for r in results} == {"ok"}
        assert 8 <= slow.max_in_flight <= 16  # many at once, never more than allowed


def test_requests_per_minute_spaces_requests(server, make_judge):
    judge = make_judge(requests_per_minute=600, concurrency=8)  # one every 0.1 s
    started = time.monotonic()
    judge_once(judge, [item(pair_id=n, first=f"answer {n}") for n in range(6)])
    assert time.monotonic() - started >= 0.45


def test_latency_and_token_usage_are_recorded(server, make_judge):
    server.reset(verdict("1"))
    (result,) = judge_once(make_judge(), [item()])
    assert result.latency_ms is not None
    assert result.latency_ms >= 0
    assert result.prompt_tokens > 50  # the fake counts a quarter of the prompt's characters
    assert result.completion_tokens > 0


def test_a_named_but_unset_key_variable_is_an_error_naming_it(server, make_judge, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    (result,) = judge_once(make_judge(api_key_env=KEY_ENV), [item()])
    assert result.outcome == "error"
    assert KEY_ENV in result.error
    assert server.request_count == 0


def test_a_key_with_a_newline_fails_each_item_alone_unsent_and_unretried(
    server, make_judge, monkeypatch
):
    """A key read from a file with its newline: aiohttp refuses the header before sending
    (a ValueError, not a ClientError); each item is a permanent error, the batch goes on."""
    monkeypatch.setenv(KEY_ENV, "sk-from-a-file\n")
    results = judge_once(make_judge(api_key_env=KEY_ENV), [item(), item()])
    assert [result.outcome for result in results] == ["error", "error"]
    assert all(not result.transient for result in results)
    assert "control character" in results[0].error
    assert "sk-from-a-file" not in results[0].error
    assert server.request_count == 0


def test_the_api_key_is_sent_but_never_stored_logged_or_shown(
    server, make_judge, monkeypatch, caplog, admin_client
):
    monkeypatch.setenv(KEY_ENV, SECRET)

    def echo_headers(request):
        # A hostile or buggy server echoing the Authorization header back.
        auth = request.headers.get("Authorization", "")
        if request.number == 0:
            return Reply(content=f'{{"better": "1", "reasoning": "saw {auth}"}}')
        return status(400, body=f"bad key {auth}")

    server.reset(echo_headers)
    judge = make_judge(api_key_env=KEY_ENV)
    caplog.set_level(logging.DEBUG)
    results = judge_once(judge, [item(pair_id=1)])
    results += judge_once(judge, [item(pair_id=2)])
    server.reset(status(503))
    results += judge_once(judge, [item(pair_id=3)])

    assert server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    project_pairs = _pairs(3)
    run = FilterRunFactory(project=project_pairs[0].project, number=1)
    for pair, result in zip(project_pairs, results, strict=True):
        Verdict.objects.create(
            run=run,
            judge=judge,
            pair=pair,
            order="AB",
            outcome=result.outcome,
            side="A" if result.outcome == "ok" else "",
            reasoning=result.reasoning,
            raw=result.raw,
            error=result.error,
        )
    assert [r.outcome for r in results] == ["ok", "error", "error"]
    assert "[redacted]" in results[0].reasoning
    assert "[redacted]" in results[1].error

    dump = io.StringIO()
    call_command("dumpdata", "judges", "annotation", stdout=dump)
    assert SECRET not in dump.getvalue()
    assert SECRET not in caplog.text
    assert SECRET not in repr(get_backend(judge))
    assert all(SECRET not in repr(result) for result in results)
    for url in ("/admin/judges/judge/", f"/admin/judges/judge/{judge.pk}/change/"):
        page = admin_client.get(url).content.decode()
        assert KEY_ENV in page
        assert SECRET not in page


def _pairs(n: int):
    return PairFactory.create_batch(n)


# A judge must never send other variables, nor let a cut keep part of the key -------------


def substrings(secret: str, length: int = 4) -> set[str]:
    return {secret[i : i + length] for i in range(len(secret) - length + 1)}


def run_one_pair(judge: Judge, django_capture_on_commit_callbacks) -> Verdict:
    """A filter run of ``judge`` on one pair, its tasks run inline; the pair's AB verdict."""
    pair = PairFactory()
    with django_capture_on_commit_callbacks(execute=True):
        run = filter_run_create(project=pair.project, judges=[judge])
    return Verdict.objects.get(run=run, order="AB")


@pytest.mark.usefixtures("celery_eager")
def test_a_stored_judge_naming_django_secret_key_never_sends_it(
    server, make_judge, monkeypatch, django_capture_on_commit_callbacks
):
    """The tester's attack, as a row saved before the pattern rule: the worker reads nothing."""
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET)
    judge = make_judge(api_key_env="DJANGO_SECRET_KEY")  # forced past judge_check
    verdict = run_one_pair(judge, django_capture_on_commit_callbacks)
    assert server.request_count == 0  # so no Authorization header reached the server
    assert verdict.outcome == "error"
    assert verdict.attempts == 1
    assert "ARBITER_JUDGE_KEY_ENV_PATTERN (ARBITER_JUDGE_KEY_*)" in verdict.error
    assert not substrings(SECRET) & substrings(verdict.error + verdict.raw)


def echo_key_at_the_cut(code: int):
    """A server echoing the Authorization header so that the key straddles the length an
    error body is cut to."""

    def rule(request):
        auth = request.headers.get("Authorization", "")
        padding = "x" * (ERROR_BODY_CHARS - len("Bearer ") - len(SECRET) // 2)
        return Reply(status=code, body=f"{padding}{auth} was refused")

    return rule


@pytest.mark.usefixtures("celery_eager")
@pytest.mark.parametrize("code", [200, 401, 503])  # not a completion, permanent, transient
def test_an_echoed_key_is_redacted_before_the_error_is_cut(
    server, make_judge, monkeypatch, settings, django_capture_on_commit_callbacks, code
):
    settings.ARBITER_JUDGE_MAX_ATTEMPTS = 1
    monkeypatch.setenv(KEY_ENV, SECRET)
    server.reset(echo_key_at_the_cut(code))
    judge = make_judge(api_key_env=KEY_ENV, options={"max_retries": 0})
    verdict = run_one_pair(judge, django_capture_on_commit_callbacks)
    assert server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert verdict.outcome == "error"
    assert not substrings(SECRET) & substrings(verdict.error + verdict.raw)
    if code != 503:  # a transient failure records only its status
        assert "[redacted]" in verdict.error
        assert "x" * 20 in verdict.error


@pytest.fixture
def proxy_env(monkeypatch):
    """No proxy from the machine's environment: each test sets its own."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def test_a_judge_calls_through_the_proxy_the_environment_names(server, make_judge, proxy_env):
    proxy_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    # A host that resolves nowhere: only the proxy can answer for it.
    judge = make_judge(base_url="http://judge.invalid/v1", options={"max_retries": 0})
    (result,) = judge_once(judge, [item()])
    assert result.outcome == "ok"
    assert server.request_count == 1


def test_no_proxy_hosts_are_called_directly(server, make_judge, proxy_env):
    proxy_env.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    proxy_env.setenv("NO_PROXY", "127.0.0.1")
    (result,) = judge_once(make_judge(options={"max_retries": 0}), [item()])
    assert result.outcome == "ok"
    assert server.request_count == 1


def test_netrc_credentials_never_reach_a_judge(server, make_judge, proxy_env, tmp_path):
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password netrc-secret\n")
    netrc.chmod(0o600)
    proxy_env.setenv("NETRC", str(netrc))
    (result,) = judge_once(make_judge(), [item()])
    assert result.outcome == "ok"
    assert "Authorization" not in server.requests[0].headers
