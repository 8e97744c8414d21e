"""Judges in the app (docs/judges.md, "The judges page"): operators add and edit judges with
the checks ``add_judge`` makes; everyone else is refused; a project's curators and researchers
see, read-only, the judges the project may run."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from judges.models import Judge
from judges.reward_model.model import init_checkpoint
from tests.factories import JudgeFactory, UserFactory

pytestmark = pytest.mark.django_db

LIST = reverse("judges:judge-list")


@pytest.fixture
def operator(db):
    return UserFactory(username="olga", is_staff=True)


def edit_url(judge: Judge) -> str:
    return reverse("judges:judge-edit", args=[judge.pk])


def openai_data(**changes) -> dict:
    return {
        "name": "qwen3-vl",
        "kind": "openai",
        "base_url": "http://vllm:8000/v1",
        "model": "Qwen/Qwen3-VL-8B-Instruct",
        "api_key_env": "ARBITER_JUDGE_KEY_VLLM",
        "concurrency": "32",
        "options": '{"prompt": "mmrb2"}',
        **changes,
    }


def test_an_operator_adds_an_openai_judge_limited_to_a_project(
    client_for, operator, project, other_project
):
    client = client_for(operator)
    assert client.get(LIST).status_code == 200
    response = client.post(LIST, {**openai_data(), "enabled": "on", "projects": [project.pk]})
    assert response.status_code == 302, response.context["form"].errors
    judge = Judge.objects.get(name="qwen3-vl")
    assert (judge.kind, judge.base_url, judge.model) == (
        "openai",
        "http://vllm:8000/v1",
        "Qwen/Qwen3-VL-8B-Instruct",
    )
    assert (judge.api_key_env, judge.concurrency, judge.enabled) == (
        "ARBITER_JUDGE_KEY_VLLM",
        32,
        True,
    )
    assert judge.options == {"prompt": "mmrb2"}
    assert judge.timeout_s == 60.0, "a blank field keeps the model's default"
    assert list(judge.projects.all()) == [project]
    assert "qwen3-vl" in client.get(LIST).content.decode()


def test_the_form_makes_add_judges_checks(client_for, operator, checkpoint_root, tmp_path):
    client = client_for(operator)
    outside = init_checkpoint(tmp_path / "outside.pt", n_buckets=64, embed_dim=4, hidden_dim=4)
    cases = [
        (openai_data(base_url=""), "base_url"),
        (openai_data(base_url="ftp://x/"), "base_url"),
        (openai_data(model=""), "model"),
        (openai_data(concurrency="0"), "concurrency"),
        (openai_data(options='{"nonsense": 1}'), "options"),
        ({"name": "rm", "kind": "reward_model", "checkpoint": str(outside)}, "checkpoint"),
        ({"name": "Not a slug!", "kind": "heuristic"}, "name"),
    ]
    for data, field in cases:
        response = client.post(LIST, data)
        assert response.status_code == 400, data
        assert field in response.context["form"].errors, (data, response.context["form"].errors)
    assert not Judge.objects.exists()


def test_a_pasted_key_is_refused_and_never_shown_again(client_for, operator):
    secret = "sk-live-0123456789abcdef"
    response = client_for(operator).post(LIST, openai_data(api_key_env=secret))
    assert response.status_code == 400
    assert "ARBITER_JUDGE_KEY_ENV_PATTERN" in response.content.decode()
    assert secret not in response.content.decode()
    assert not Judge.objects.exists()


def test_a_reward_model_judge_takes_a_checkpoint_under_the_root(
    client_for, operator, checkpoint_root
):
    init_checkpoint(checkpoint_root / "rm.pt", n_buckets=64, embed_dim=4, hidden_dim=4)
    data = {"name": "rm", "kind": "reward_model", "checkpoint": "rm.pt", "batch_size": "8"}
    assert client_for(operator).post(LIST, data).status_code == 302
    judge = Judge.objects.get(name="rm")
    assert (judge.checkpoint, judge.batch_size, judge.device) == ("rm.pt", 8, "cpu")


def test_an_operator_edits_and_disables_a_judge(client_for, operator, project):
    judge = JudgeFactory(name="qwen3-vl", kind="openai", base_url="http://vllm:8000/v1", model="m")
    client = client_for(operator)
    page = client.get(edit_url(judge))
    assert page.status_code == 200
    assert 'name="checkpoint"' not in page.content.decode()
    data = {
        "base_url": "http://vllm2:8000/v1",
        "model": "m2",
        "api_key_env": "",
        "concurrency": "4",
        "temperature": "0",
        "max_tokens": "256",
        "timeout_s": "30",
        "requests_per_minute": "0",
        "max_image_side": "512",
        "video_frames": "8",
        "video_frame_side": "512",
        "options": "{}",
        "projects": [project.pk],
        # name and kind cannot change: sent anyway, they are ignored
        "name": "renamed",
        "kind": "heuristic",
    }
    assert client.post(edit_url(judge), data).status_code == 302
    judge.refresh_from_db()
    assert (judge.name, judge.kind, judge.enabled) == ("qwen3-vl", "openai", False)
    assert (judge.base_url, judge.model, judge.concurrency, judge.max_tokens) == (
        "http://vllm2:8000/v1",
        "m2",
        4,
        256,
    )
    assert list(judge.projects.all()) == [project]
    assert client.post(edit_url(judge), {**data, "enabled": "on"}).status_code == 302
    judge.refresh_from_db()
    assert judge.enabled
    refused = client.post(edit_url(judge), {**data, "concurrency": "0"})
    assert refused.status_code == 400
    assert "concurrency" in refused.context["form"].errors
    judge.refresh_from_db()
    assert judge.concurrency == 4


def test_only_operators_manage_judges(client_for, carol, dave, alice, eve, operator):
    judge = JudgeFactory(name="h")
    for user in (carol, dave, alice, eve):
        client = client_for(user)
        for url in (LIST, edit_url(judge)):
            assert client.get(url).status_code == 403, (user, url)
        assert client.post(LIST, {"name": "x", "kind": "heuristic"}).status_code == 403
        assert client.post(edit_url(judge), {"enabled": ""}).status_code == 403
        assert "judges:judge-list" not in client.get(reverse("home")).content.decode()
    assert Client().get(LIST).status_code == 302  # to the login
    judge.refresh_from_db()
    assert judge.enabled
    assert Judge.objects.count() == 1
    assert f'href="{LIST}"' in client_for(operator).get(reverse("home")).content.decode()


def test_judge_management_needs_csrf(operator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.post(LIST, {"name": "x", "kind": "heuristic"}).status_code == 403
    assert not Judge.objects.exists()


def test_curators_see_the_judges_their_project_may_use(
    client_for, carol, dave, alice, eve, operator, project, other_project
):
    everyone = JudgeFactory(name="for-everyone")
    mine = JudgeFactory(name="for-demo", kind="scores", enabled=False)
    mine.projects.set([project])
    theirs = JudgeFactory(name="for-other")
    theirs.projects.set([other_project])
    url = reverse("judges:project-judges", args=[project.slug])
    for user in (carol, dave):
        body = client_for(user).get(url).content.decode()
        assert everyone.name in body
        assert mine.name in body
        assert theirs.name not in body
        assert "disabled: never called" in body
        assert '<form method="post" action="/judges/' not in body, "read-only"
        assert edit_url(mine) not in body
    assert client_for(alice).get(url).status_code == 403
    assert client_for(eve).get(url).status_code == 404
    # Staff see a project's pages as its members do; a superuser acts as its curator.
    assert client_for(operator).get(url).status_code == 404
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    assert edit_url(mine) in client_for(root).get(url).content.decode()


def test_deeply_nested_options_are_refused(client_for, operator):
    deep = "[" * 100_000 + "]" * 100_000
    response = client_for(operator).post(LIST, {"name": "h", "kind": "heuristic", "options": deep})
    assert response.status_code == 400
    assert "options" in response.context["form"].errors
    assert not Judge.objects.exists()
