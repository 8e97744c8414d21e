"""The claim and the vote on SQLite, as ``make demo`` runs them: the suite's database is
PostgreSQL, where the claim's statements take other forms (annotation/queue/services/)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

# Two annotators each take the pairs in their serving order, vote on each once, and find
# nothing left; the leases and votes are as the claim and the vote wrote them.
SCRIPT = """
from annotation.models import Assignment, PairStatus, Role, Vote
from annotation.queue.services.claim import assignment_claim
from annotation.queue.services.votes import vote_submit
from tests.factories import MembershipFactory, PairFactory, ProjectFactory, UserFactory

project = ProjectFactory(slug="sqlite-demo", overlap=2)
PairFactory.create_batch(3, project=project, status=PairStatus.QUEUED)
for name in ("ann", "bea"):
    user = UserFactory(username=name)
    MembershipFactory(project=project, user=user, role=Role.ANNOTATOR)
    seen = []
    while (held := assignment_claim(project=project, annotator=user)) is not None:
        assert held.pk and held.status == Assignment.Status.LIVE, held
        assert assignment_claim(project=project, annotator=user).pk == held.pk
        assert held.pair.prompt.content, "the content is loaded"
        vote_submit(assignment=held, annotator=user, choice="left")
        seen.append(held.pair_id)
    assert len(seen) == 3 == len(set(seen)), seen
assert Vote.objects.count() == 6
assert not Assignment.objects.filter(status=Assignment.Status.LIVE).exists()
print("claimed and voted on SQLite")
"""


def test_claim_and_vote_work_on_sqlite(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CELERY_BROKER_URL": "memory://",
        "ARBITER_ENV": "development",
        "ARBITER_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, cwd=ROOT, check=True, timeout=300)
    done = subprocess.run(
        [*manage, "shell", "-c", SCRIPT],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "claimed and voted on SQLite" in done.stdout
