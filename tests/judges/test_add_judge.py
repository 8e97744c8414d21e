"""Creating judges from the command line and in the admin, checked per kind."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from judges.models import Judge
from judges.reward_model import init_checkpoint


def add_judge(*args) -> str:
    out = io.StringIO()
    call_command("add_judge", *args, stdout=out)
    return out.getvalue()


def test_add_an_openai_judge_with_all_settings(db):
    output = add_judge(
        "qwen3-vl",
        "--kind=openai",
        "--base-url=http://vllm:8000/v1",
        "--model=Qwen/Qwen3-VL-8B-Instruct",
        "--api-key-env=VLLM_API_KEY",
        "--concurrency=64",
        "--temperature=0.2",
        "--max-tokens=512",
        "--timeout=30",
        "--rpm=600",
        "--max-image-side=768",
    )
    judge = Judge.objects.get(name="qwen3-vl")
    assert "Created openai judge qwen3-vl (queue judges_http)" in output
    assert (judge.base_url, judge.model, judge.api_key_env) == (
        "http://vllm:8000/v1",
        "Qwen/Qwen3-VL-8B-Instruct",
        "VLLM_API_KEY",
    )
    assert (judge.concurrency, judge.temperature, judge.max_tokens) == (64, 0.2, 512)
    assert (judge.timeout_s, judge.requests_per_minute, judge.max_image_side) == (30, 600, 768)


def test_add_a_reward_model_judge(db, tmp_path):
    checkpoint = init_checkpoint(tmp_path / "rm.pt", n_buckets=512, embed_dim=8, hidden_dim=8)
    output = add_judge(
        "rm-small", "--kind=reward_model", f"--checkpoint={checkpoint}", "--batch-size=128"
    )
    judge = Judge.objects.get(name="rm-small")
    assert "queue judges_gpu" in output
    assert (judge.checkpoint, judge.device, judge.batch_size) == (str(checkpoint), "cpu", 128)


@pytest.mark.parametrize("kind", ["heuristic", "scores"])
def test_heuristic_and_scores_judges_need_nothing(db, kind):
    add_judge(f"j-{kind}", f"--kind={kind}")
    assert Judge.objects.get(name=f"j-{kind}").kind == kind


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind=openai", "--model=m"], "base_url: An openai judge needs a base URL"),
        (["--kind=openai", "--base-url=http://h/v1"], "model: An openai judge needs a model"),
        (["--kind=openai", "--base-url=ftp://h/v1", "--model=m"], "base_url: The base URL must"),
        (
            ["--kind=openai", "--base-url=http://h/v1", "--model=m", "--concurrency=0"],
            "concurrency: At least 1",
        ),
        (["--kind=reward_model"], "checkpoint: A reward_model judge needs a checkpoint"),
        (["--kind=reward_model", "--checkpoint=/nonexistent.pt"], "no such checkpoint file"),
        (
            ["--kind=reward_model", "--checkpoint=X", "--device=tpu"],
            "device: The device must be cpu, cuda or cuda:N",
        ),
        (["--kind=heuristic", "--checkpoint=/x.pt"], "--checkpoint does not apply to --kind"),
        (["--kind=scores", "--base-url=http://h/v1"], "--base-url does not apply to --kind"),
    ],
)
def test_bad_judges_are_refused_with_the_field_named(db, args, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        add_judge("bad", *args)
    assert not Judge.objects.exists()


def test_a_pasted_key_instead_of_a_variable_name_is_refused_and_not_echoed(db):
    pasted = "sk-live-0123456789abcdef"
    with pytest.raises(CommandError) as caught:
        add_judge(
            "j", "--kind=openai", "--base-url=http://h/v1", "--model=m", f"--api-key-env={pasted}"
        )
    assert "api_key_env: Give the NAME of an environment variable" in str(caught.value)
    assert pasted not in str(caught.value)


def test_a_broken_checkpoint_is_refused(db, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"garbage")
    with pytest.raises(CommandError, match="not a readable torch checkpoint"):
        add_judge("rm", "--kind=reward_model", f"--checkpoint={bad}")


def test_names_are_unique(db):
    add_judge("twice", "--kind=heuristic")
    with pytest.raises(CommandError, match="name: Judge with this Name already exists"):
        add_judge("twice", "--kind=scores")


def test_admin_creates_judges_with_the_same_checks(admin_client):
    form = {
        "name": "admin-judge",
        "kind": "openai",
        "enabled": "on",
        "base_url": "",
        "model": "gpt-x",
        "api_key_env": "OPENAI_API_KEY",
        "temperature": "0",
        "max_tokens": "1024",
        "timeout_s": "60",
        "concurrency": "16",
        "requests_per_minute": "0",
        "max_image_side": "1024",
        "checkpoint": "",
        "device": "cpu",
        "batch_size": "64",
        "options": "{}",
    }
    refused = admin_client.post("/admin/judges/judge/add/", form)
    assert refused.status_code == 200
    assert "An openai judge needs a base URL" in refused.content.decode()
    bad_option = admin_client.post(
        "/admin/judges/judge/add/",
        {**form, "base_url": "http://h/v1", "options": '{"retries": 3}'},
    )
    assert "Unknown option(s) retries for kind openai" in bad_option.content.decode()
    created = admin_client.post(
        "/admin/judges/judge/add/",
        {**form, "base_url": "http://h/v1", "options": '{"max_retries": 2}'},
    )
    assert created.status_code == 302
    judge = Judge.objects.get(name="admin-judge")
    assert judge.options == {"max_retries": 2}
    page = admin_client.get(f"/admin/judges/judge/{judge.pk}/change/").content.decode()
    assert "OPENAI_API_KEY" in page and "scores_key" in page  # the options help


def test_annotators_and_outsiders_cannot_reach_the_judge_admin(client_for, alice, eve):
    for user in (alice, eve):
        response = client_for(user).get("/admin/judges/judge/")
        assert response.status_code == 302  # to the admin login: not staff


def test_staff_who_are_not_superusers_stay_out_even_with_judge_permissions(client_for, db):
    from django.contrib.auth.models import Permission

    from tests.factories import UserFactory

    staff = UserFactory(username="staffer", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__endswith="_judge"))
    client = client_for(staff)
    for url in ("/admin/judges/judge/", "/admin/judges/judge/add/"):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response.url
