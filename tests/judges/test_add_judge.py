"""Creating judges from the command line and in the admin, checked per kind."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from judges.models import Judge
from judges.reward_model.model import init_checkpoint
from judges.roster.services import judge_check
from tests.factories import JudgeFactory, UserFactory


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
        "--api-key-env=ARBITER_JUDGE_KEY_VLLM",
        "--concurrency=64",
        "--temperature=0.2",
        "--max-tokens=512",
        "--timeout=30",
        "--rpm=600",
        "--max-image-side=768",
    )
    judge = Judge.objects.get(name="qwen3-vl")
    assert "Created openai judge qwen3-vl (queue judges_http), available to every" in output
    assert (judge.base_url, judge.model, judge.api_key_env) == (
        "http://vllm:8000/v1",
        "Qwen/Qwen3-VL-8B-Instruct",
        "ARBITER_JUDGE_KEY_VLLM",
    )
    assert (judge.concurrency, judge.temperature, judge.max_tokens) == (64, 0.2, 512)
    assert (judge.timeout_s, judge.requests_per_minute, judge.max_image_side) == (30, 600, 768)


def test_add_a_reward_model_judge(db, checkpoint_root):
    checkpoint = init_checkpoint(
        checkpoint_root / "rm.pt", n_buckets=512, embed_dim=8, hidden_dim=8
    )
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
        (["--kind=reward_model", "--checkpoint=absent.pt"], "no such checkpoint file"),
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
    assert "api_key_env: api_key_env must be the NAME of an environment variable" in str(
        caught.value
    )
    assert pasted not in str(caught.value)


def test_a_broken_checkpoint_is_refused(db, checkpoint_root):
    bad = checkpoint_root / "bad.pt"
    bad.write_bytes(b"garbage")
    with pytest.raises(CommandError, match="not a readable torch checkpoint"):
        add_judge("rm", "--kind=reward_model", f"--checkpoint={bad}")


def test_names_are_unique(db):
    add_judge("twice", "--kind=heuristic")
    with pytest.raises(CommandError, match="name: Judge with this Name already exists"):
        add_judge("twice", "--kind=scores")


ADMIN_FORM = {
    "name": "admin-judge",
    "kind": "openai",
    "enabled": "on",
    "base_url": "",
    "model": "gpt-x",
    "api_key_env": "ARBITER_JUDGE_KEY_OPENAI",
    "temperature": "0",
    "max_tokens": "1024",
    "timeout_s": "60",
    "concurrency": "16",
    "requests_per_minute": "0",
    "max_image_side": "1024",
    "video_frames": "8",
    "video_frame_side": "512",
    "checkpoint": "",
    "device": "cpu",
    "batch_size": "64",
    "options": "{}",
}


def test_admin_creates_judges_with_the_same_checks(admin_client):
    refused = admin_client.post("/admin/judges/judge/add/", ADMIN_FORM)
    assert refused.status_code == 200
    assert "An openai judge needs a base URL" in refused.content.decode()
    bad_option = admin_client.post(
        "/admin/judges/judge/add/",
        {**ADMIN_FORM, "base_url": "http://h/v1", "options": '{"retries": 3}'},
    )
    assert "Unknown option(s) retries for kind openai" in bad_option.content.decode()
    created = admin_client.post(
        "/admin/judges/judge/add/",
        {**ADMIN_FORM, "base_url": "http://h/v1", "options": '{"max_retries": 2}'},
    )
    assert created.status_code == 302
    judge = Judge.objects.get(name="admin-judge")
    assert judge.options == {"max_retries": 2}
    page = admin_client.get(f"/admin/judges/judge/{judge.pk}/change/").content.decode()
    assert "ARBITER_JUDGE_KEY_OPENAI" in page
    assert "scores_key" in page


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
        assert response.status_code == 302
        assert "/admin/login/" in response.url


# Operators only (docs/judges.md) ----------------------------------------------------------

SECRET_KEY_VALUE = "django-insecure-0123456789-the-real-secret-key"


@pytest.fixture
def shared_judge(db):
    return JudgeFactory(
        name="shared", kind="openai", base_url="http://judges.internal/v1", model="m"
    )


def assert_refused(response) -> None:
    """The admin site sends non-superusers to its login; the judge admin itself answers 403."""
    assert response.status_code == 403 or (
        response.status_code == 302 and "/admin/login/" in response.url
    ), response.status_code


def test_the_judge_admin_itself_refuses_writes_to_staff_with_every_permission(rf, db):
    from django.contrib import admin

    staff = UserFactory(username="judge-editor", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(content_type__app_label="judges"))
    request = rf.get("/admin/judges/judge/")
    request.user = staff
    judge_admin = admin.site._registry[Judge]
    assert staff.has_perm("judges.add_judge")
    assert not judge_admin.has_add_permission(request)
    assert not judge_admin.has_change_permission(request)
    assert not judge_admin.has_delete_permission(request)


@pytest.mark.parametrize("persona", ["carol", "staff_with_every_judge_permission"])
def test_only_superusers_add_change_or_delete_judges(request, client_for, persona, shared_judge):
    if persona == "carol":
        user = request.getfixturevalue("carol")  # a curator
    else:
        user = UserFactory(username="judge-editor", is_staff=True)
        user.user_permissions.add(*Permission.objects.filter(content_type__app_label="judges"))
    client = client_for(user)
    change = f"/admin/judges/judge/{shared_judge.pk}/change/"
    assert_refused(client.get("/admin/judges/judge/add/"))
    added = client.post(
        "/admin/judges/judge/add/", {**ADMIN_FORM, "base_url": "http://attacker.example/v1"}
    )
    assert_refused(added)
    # Redirecting a shared judge (other projects' prompts and keys) to the curator's server:
    redirected = client.post(change, {**ADMIN_FORM, "name": "shared", "base_url": "http://x/v1"})
    assert_refused(redirected)
    deleted = client.post(f"/admin/judges/judge/{shared_judge.pk}/delete/", {"post": "yes"})
    assert_refused(deleted)
    shared_judge.refresh_from_db()
    assert shared_judge.base_url == "http://judges.internal/v1"
    assert list(Judge.objects.values_list("name", flat=True)) == ["shared"]


def test_a_superuser_changes_a_judge_and_the_projects_that_may_use_it(
    admin_client, shared_judge, project, other_project
):
    changed = admin_client.post(
        f"/admin/judges/judge/{shared_judge.pk}/change/",
        {**ADMIN_FORM, "name": "shared", "base_url": "http://h/v1", "projects": [project.pk]},
    )
    assert changed.status_code == 302
    shared_judge.refresh_from_db()
    assert shared_judge.base_url == "http://h/v1"
    assert list(shared_judge.projects.all()) == [project]


def test_sending_django_secret_key_as_a_judge_key_is_refused_everywhere(admin_client, monkeypatch):
    """The tester's attack: a judge whose key variable is DJANGO_SECRET_KEY."""
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET_KEY_VALUE)
    refusal = "api_key_env must be the NAME of an environment variable matching"
    pattern = "ARBITER_JUDGE_KEY_ENV_PATTERN (ARBITER_JUDGE_KEY_*)"
    args = ["--kind=openai", "--base-url=http://127.0.0.1:9/v1", "--model=m"]
    with pytest.raises(CommandError) as caught:
        add_judge("thief", *args, "--api-key-env=DJANGO_SECRET_KEY")
    assert refusal in str(caught.value)
    assert pattern in str(caught.value)
    form = {**ADMIN_FORM, "base_url": "http://127.0.0.1:9/v1", "api_key_env": "DJANGO_SECRET_KEY"}
    page = admin_client.post("/admin/judges/judge/add/", form).content.decode()
    assert refusal in page
    assert "ARBITER_JUDGE_KEY_*" in page
    judge = Judge(
        name="thief", kind="openai", base_url="http://h/v1", model="m", api_key_env="DATABASE_URL"
    )
    with pytest.raises(ValidationError) as checked:
        judge_check(judge)
    assert pattern in checked.value.message_dict["api_key_env"][0]
    assert not Judge.objects.exists()
    assert SECRET_KEY_VALUE not in str(caught.value) + page


@pytest.mark.parametrize(
    ("pattern", "name", "allowed"),
    [
        ("ARBITER_JUDGE_KEY_*", "ARBITER_JUDGE_KEY_OPENAI", True),
        ("ARBITER_JUDGE_KEY_*", "arbiter_judge_key_openai", False),  # case counts
        ("ARBITER_JUDGE_KEY_*", "OPENAI_API_KEY", False),
        ("JUDGE_*_KEY", "JUDGE_VLLM_KEY", True),
    ],
)
def test_the_key_variable_pattern_is_a_setting(settings, pattern, name, allowed):
    settings.ARBITER_JUDGE_KEY_ENV_PATTERN = pattern
    judge = Judge(name="j", kind="openai", base_url="http://h/v1", model="m", api_key_env=name)
    if allowed:
        judge_check(judge)
    else:
        with pytest.raises(ValidationError, match=re.escape(f"PATTERN ({pattern})")):
            judge_check(judge)


def test_no_judge_page_says_whether_a_key_variable_is_set(admin_client, monkeypatch):
    judge = JudgeFactory(
        name="keyed",
        kind="openai",
        base_url="http://h/v1",
        model="m",
        api_key_env="ARBITER_JUDGE_KEY_KEYED",
    )
    pages = {}
    for state in ("unset", "set"):
        if state == "set":
            monkeypatch.setenv("ARBITER_JUDGE_KEY_KEYED", "sk-value")
        else:
            monkeypatch.delenv("ARBITER_JUDGE_KEY_KEYED", raising=False)
        pages[state] = [
            CSRF_INPUT.sub("", admin_client.get(url).content.decode())
            for url in ("/admin/judges/judge/", f"/admin/judges/judge/{judge.pk}/change/")
        ]
    assert pages["set"] == pages["unset"]
    assert "not set" not in "".join(pages["unset"])


CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"')


# Projects a judge is available to ---------------------------------------------------------


def test_add_judge_limits_a_judge_to_the_projects_named(project, other_project):
    output = add_judge("scoped", "--kind=heuristic", "--project=demo", "--project=other")
    assert "available to demo, other" in output
    assert set(Judge.objects.get(name="scoped").projects.all()) == {project, other_project}
    with pytest.raises(CommandError, match="--project: no project with slug nope"):
        add_judge("lost", "--kind=heuristic", "--project=nope")
    assert not Judge.objects.filter(name="lost").exists()


# Checkpoints under ARBITER_CHECKPOINT_ROOT ------------------------------------------------


def test_a_checkpoint_relative_to_the_root_is_accepted(db, checkpoint_root):
    init_checkpoint(checkpoint_root / "models" / "rm.pt", n_buckets=64, embed_dim=4, hidden_dim=4)
    add_judge("rm", "--kind=reward_model", "--checkpoint=models/rm.pt")
    assert Judge.objects.get(name="rm").checkpoint == "models/rm.pt"


@pytest.mark.parametrize("where", ["etc_passwd", "dot_dot", "symlink_out", "missing_outside"])
def test_checkpoints_outside_the_root_get_one_answer_whether_or_not_they_exist(
    db, checkpoint_root, tmp_path, where
):
    outside = init_checkpoint(tmp_path / "outside.pt", n_buckets=64, embed_dim=4, hidden_dim=4)
    (checkpoint_root / "link.pt").symlink_to(outside)
    path = {
        "etc_passwd": "/etc/passwd",
        "dot_dot": f"{checkpoint_root}/../outside.pt",  # a real checkpoint, one level up
        "symlink_out": "link.pt",
        "missing_outside": str(tmp_path / "absent.pt"),
    }[where]
    with pytest.raises(CommandError) as caught:
        add_judge("rm", "--kind=reward_model", f"--checkpoint={path}")
    root = checkpoint_root.resolve()
    assert str(caught.value) == (
        f"Judge not created:\n  checkpoint: Checkpoints must lie under "
        f"ARBITER_CHECKPOINT_ROOT ({root})"
    )
    assert not Judge.objects.exists()
