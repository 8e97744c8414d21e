"""The Django admin is for operators (active superusers) only. Curators, even those the old
code made staff and put in its "Curators" group, get no admin page and cannot use its forms
to make themselves curators of other projects."""

from __future__ import annotations

from django.apps import apps as django_apps
from django.contrib.auth.models import Group, Permission
from django.db.migrations.loader import MigrationLoader
from django.urls import reverse

from annotation.models import Membership, Role
from tests.conftest import PASSWORD
from tests.factories import UserFactory

ADMIN_PAGES = [
    "admin:index",
    "admin:annotation_membership_add",
    "admin:annotation_membership_changelist",
    "admin:annotation_project_changelist",
    "admin:annotation_pair_changelist",
    "admin:auth_user_changelist",
]


def escalate_the_old_way(user) -> None:
    """What ``member_add`` used to do for a curator: staff, and the Curators group with the
    admin's membership permissions."""
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    group, _ = Group.objects.get_or_create(name="Curators")
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label__in=["annotation", "auth"],
            codename__in=[
                "view_membership",
                "add_membership",
                "change_membership",
                "view_project",
                "view_user",
            ],
        )
    )
    user.groups.add(group)


def run_group_removal_migration() -> None:
    """The data migration that removes the Curators group, run against today's models."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    migration = next(
        migration
        for (app, name), migration in loader.disk_migrations.items()
        if app == "annotation" and name.endswith("_remove_curators_group")
    )
    (operation,) = migration.operations
    operation.code(django_apps, None)


def assert_sent_to_admin_login(response) -> None:
    assert response.status_code == 302
    assert response.url.startswith("/admin/login/")


def test_curators_get_no_admin_page_even_when_made_staff(client_for, carol, project):
    escalate_the_old_way(carol)
    client = client_for(carol)
    for name in ADMIN_PAGES:
        assert_sent_to_admin_login(client.get(reverse(name)))


def test_the_old_membership_attack_creates_nothing(client_for, carol, project, other_project):
    escalate_the_old_way(carol)
    response = client_for(carol).post(
        "/admin/annotation/membership/add/",
        {"project": other_project.pk, "user": carol.pk, "role": Role.CURATOR},
    )
    assert_sent_to_admin_login(response)
    assert not Membership.objects.filter(project=other_project).exists()
    assert list(Membership.objects.filter(user=carol).values_list("project__slug", flat=True)) == [
        project.slug
    ]


def test_the_admin_login_refuses_staff_who_are_not_superusers(client, carol):
    escalate_the_old_way(carol)
    response = client.post(
        reverse("admin:login"), {"username": "carol", "password": PASSWORD, "next": "/admin/"}
    )
    assert response.status_code == 200
    assert "Please enter the correct username and password" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_inactive_superusers_stay_out(client_for, db):
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    client = client_for(root)
    root.is_active = False
    root.save(update_fields=["is_active"])
    assert client.get(reverse("admin:index")).status_code == 302


def test_operators_use_the_whole_admin(client_for, carol, project, other_project):
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    client = client_for(root)
    listing = client.get(reverse("admin:annotation_project_changelist")).content.decode()
    assert project.name in listing
    assert other_project.name in listing
    response = client.post(
        "/admin/annotation/membership/add/",
        {"project": other_project.pk, "user": carol.pk, "role": Role.RESEARCHER},
    )
    assert response.status_code == 302
    assert Membership.objects.get(project=other_project, user=carol).role == Role.RESEARCHER


def test_the_migration_removes_the_group_and_the_staff_it_gave(carol, project):
    escalate_the_old_way(carol)
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    root.groups.add(Group.objects.get(name="Curators"))
    operator = UserFactory(username="operator", is_staff=True)
    run_group_removal_migration()
    carol.refresh_from_db()
    root.refresh_from_db()
    operator.refresh_from_db()
    assert not Group.objects.filter(name="Curators").exists()
    assert not carol.is_staff
    assert not carol.groups.exists()
    assert root.is_staff
    assert operator.is_staff
    run_group_removal_migration()  # and again, with nothing left to do


def test_curators_are_not_made_staff_and_leave_without_it(client_for, carol, project):
    client = client_for(carol)
    client.post(
        reverse("project-member-add", args=[project.slug]), {"user": "zoe", "role": "curator"}
    )
    zoe = Membership.objects.get(project=project, user__username="zoe").user
    assert not zoe.is_staff
    assert not zoe.groups.exists()
    membership = Membership.objects.get(user=zoe)
    client.post(reverse("project-member-remove", args=[project.slug, membership.pk]))
    zoe.refresh_from_db()
    assert not Membership.objects.filter(user=zoe).exists()
    assert not zoe.is_staff
    assert not zoe.groups.exists()
    assert not Group.objects.filter(name="Curators").exists()
