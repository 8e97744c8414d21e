"""Shared fixtures. The personas: alice and bob annotate, carol curates, dave researches,
and eve is an outsider with no role in the project."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings
from hypothesis.configuration import set_hypothesis_home_dir
from rest_framework.test import APIClient

from annotation.agreement.services import agreement_report_forget_requests
from annotation.core import statement_functions
from annotation.models import Role
from tests.factories import MembershipFactory, PairFactory, ProjectFactory, UserFactory
from tests.oidc_server import oidc_provider, sso_settings  # noqa: F401 - fixtures
from tests.s3_server import s3_server, s3_storage  # noqa: F401 - fixtures
from tests.smtp_server import smtp_server, smtp_tls_server  # noqa: F401 - fixtures

# The fuzz tests (tests/annotation/media/) keep no example database in the checkout: each run
# draws the same examples, so a failure in CI is the one a developer sees.
hypothesis_settings.register_profile("arbiter", database=None, derandomize=True)
hypothesis_settings.load_profile("arbiter")
# Hypothesis caches what it learns of the source (constants) under its home folder, which is
# the working directory unless told otherwise: never the checkout.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "arbiter-hypothesis")

PASSWORD = "correct horse battery staple"
ROOT = Path(__file__).resolve().parent.parent
# What a test run may leave in the checkout: bytecode and tool caches, the test OpenID
# provider's packages (git-ignored, installed by the first test that needs them when .ci/run
# has not: tests/oidc_server.py), and the screenshots a reviewer asks for
# (ARBITER_SCREENSHOTS=1, tests/browser/conftest.py).
LEFT_BY_TOOLS = (
    "__pycache__/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".mypy_cache/",
    ".import_linter_cache/",
    "tests/oidc_provider/node_modules/",
)
SCREENSHOTS = "var/screenshots/"
# The demo's PostgreSQL (docs/database.md): a server started by `make demo` or `manage.py`
# writes its own files there while the suite runs on a server of its own elsewhere.
LOCAL_DATABASE = "var/postgres/"
OUTPUT_FOLDERS = ("var", "media", "staticfiles")  # where the platform writes by default
_BEFORE = pytest.StashKey[set[str]]()


def files_outside_git() -> set[str]:
    """The checkout's untracked and ignored files (every one, in folders too) and the folders
    under the platform's output folders, the project's .venv and the tools' caches left
    out."""
    listed = subprocess.run(
        [
            "git",
            "status",
            "--porcelain",
            "--ignored",
            "--untracked-files=all",
            "--",
            ".",
            ":(exclude).venv",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    paths = {line[3:] for line in listed if line[:2] in ("??", "!!")}
    # git lists no empty folder: the platform's own output folders are walked for them
    for top in OUTPUT_FOLDERS:
        if (ROOT / top).is_dir():
            paths.add(f"{top}/")
            paths.update(
                f"{path.relative_to(ROOT).as_posix()}/"
                for path in (ROOT / top).rglob("*")
                if path.is_dir()
            )
    return {
        path
        for path in paths
        if not any(part in path for part in LEFT_BY_TOOLS) and not path.startswith(LOCAL_DATABASE)
    }


def pytest_sessionstart(session) -> None:
    session.config.stash[_BEFORE] = files_outside_git()


def pytest_sessionfinish(session, exitstatus) -> None:
    """Fails the run when the suite wrote into the checkout (README.md, "make test"): every
    file a test makes belongs in a temporary folder."""
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    written = sorted(files_outside_git() - before)
    if os.environ.get("ARBITER_SCREENSHOTS") == "1":
        written = [path for path in written if not path.startswith(SCREENSHOTS)]
    if written:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = "The suite wrote into the checkout: " + ", ".join(written[:20])
        if reporter is not None:
            reporter.write_line("")  # ends the progress line
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def requires_redis():
    return pytest.mark.skipif(
        not os.environ.get("CELERY_BROKER_URL", "").startswith("redis"),
        reason="needs Redis: set CELERY_BROKER_URL=redis://... (CI does)",
    )


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.ARBITER_RELEASE_ROOT = tmp_path / "releases"


@pytest.fixture(autouse=True)
def _fresh_refresh_requests():
    # Project ids are reused across tests: a request remembered from another test's project
    # would hold back this test's (annotation/agreement/services.py, REQUEST_GAP_S).
    agreement_report_forget_requests()


@pytest.fixture(autouse=True)
def _statement_functions_forgotten():
    # A test's transaction rolls back the functions made in it (annotation/core/
    # statement_functions.py): what a process remembers of them goes with it.
    yield
    statement_functions._KNOWN.clear()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database lets ``flush``, which ends every transactional test, empty the audit
    log: the log refuses TRUNCATE unless the session sets ``arbiter.audit_truncate`` (docs/
    audit.md, "Append-only"); connections opened from now on have it set."""
    from django.db import connection

    with django_db_blocker.unblock():
        name = connection.ops.quote_name(connection.settings_dict["NAME"])
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER DATABASE {name} SET arbiter.audit_truncate = 'on'")
        connection.close()


@pytest.fixture
def project(db):
    return ProjectFactory(slug="demo", name="Demo project", scale="ternary", overlap=3)


@pytest.fixture
def other_project(db):
    return ProjectFactory(slug="other", name="Other project")


def _member(project, username: str, role: str):
    user = UserFactory(username=username)
    MembershipFactory(project=project, user=user, role=role)
    return user


@pytest.fixture
def alice(project):
    return _member(project, "alice", Role.ANNOTATOR)


@pytest.fixture
def bob(project):
    return _member(project, "bob", Role.ANNOTATOR)


@pytest.fixture
def carol(project):
    return _member(project, "carol", Role.CURATOR)


@pytest.fixture
def dave(project):
    return _member(project, "dave", Role.RESEARCHER)


@pytest.fixture
def eve(db):
    return UserFactory(username="eve")


@pytest.fixture
def client_for(client):
    """``client_for(user)``: a Django test client logged in as ``user``."""

    def make(user):
        client.force_login(user)
        return client

    return make


@pytest.fixture
def api_for():
    """``api_for(user)``: a DRF client authenticated as ``user`` with a token."""

    def make(user):
        from rest_framework.authtoken.models import Token

        api = APIClient()
        token, _ = Token.objects.get_or_create(user=user)
        api.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return api

    return make


@pytest.fixture
def queued_pairs(project):
    """Ten pairs ready for annotators."""
    return PairFactory.create_batch(10, project=project, status="queued")


@pytest.fixture
def celery_worker_process(transactional_db, settings):
    """Starts a real Celery worker process on Redis; yields a factory for more (or kills)."""
    if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis"):
        pytest.skip("needs Redis: set CELERY_BROKER_URL=redis://... (CI does)")
    from tests.celery_worker import WorkerProcess, purge_broker

    settings.CELERY_TASK_ALWAYS_EAGER = False
    from config.celery import app

    app.conf.task_always_eager = False
    purge_broker()
    workers: list[WorkerProcess] = []

    def start(**kwargs) -> WorkerProcess:
        worker = WorkerProcess(**kwargs)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()
    app.conf.task_always_eager = True
    purge_broker()
