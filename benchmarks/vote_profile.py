"""One annotator's vote-with-next loop in this process, through the WSGI application as
gunicorn calls it (production settings: every middleware, token authentication, DRF), with
no network and no other load: the CPU a request costs the web process and the database
backend, measured apart, and where the web process spends it (``--profile``: cProfile's top
functions by own time). The quick look before and after a change to the hot path; the
figures that count are annotator_load.py's, under load.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/vote_profile.py --votes 2000
    ... benchmarks/vote_profile.py --votes 500 --profile 25

Prints the web process's CPU per request (user + system, ``time.process_time``), its
database backend's (read from /proc through psutil, PostgreSQL on this machine), the
statements per request, and the wall time per request.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def production_environment() -> None:
    """The settings annotator_load.py starts gunicorn with."""
    os.environ.update(
        {
            "ARBITER_ENV": "production",
            "DJANGO_SECRET_KEY": os.environ.get(
                "DJANGO_SECRET_KEY", "vote-profile-only-" + "x" * 40
            ),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "ARBITER_LOG_LEVEL": "WARNING",
            "DJANGO_STATIC_ROOT": os.environ.get("DJANGO_STATIC_ROOT", str(ROOT / "static")),
        }
    )
    os.environ.pop("DJANGO_DEBUG", None)


def wsgi_post(application, path: str, body: dict, token: str) -> tuple[int, dict]:
    """A POST through the WSGI application, as gunicorn's sync worker makes it."""
    raw = json.dumps(body).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8765",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1:8765",
        "HTTP_AUTHORIZATION": f"Token {token}",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(raw)),
        "wsgi.input": io.BytesIO(raw),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    status: list[str] = []

    def start_response(line, headers, exc_info=None):
        status.append(line)

    chunks = application(environ, start_response)
    try:
        payload = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    code = int(status[0].split()[0])
    return code, (json.loads(payload) if payload else {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=2000, help="votes with next, measured")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured votes first")
    parser.add_argument(
        "--overlap", type=int, default=3, help="votes a pair gets, from as many annotators"
    )
    parser.add_argument("--profile", type=int, default=0, help="print this many functions")
    parser.add_argument(
        "--webhook",
        action="store_true",
        help="give the project an active webhook taking pair.decided (docs/webhooks.md): "
        "each deciding vote writes the event and sends the delivery task (CELERY_BROKER_URL)",
    )
    args = parser.parse_args()
    production_environment()
    if args.webhook:
        os.environ["ARBITER_WEBHOOK_ALLOW_PRIVATE"] = "true"  # the endpoint is never called
    from annotator_load import (
        analyze_as_autovacuum_would,
        create_fixture,
        delete_project,
        setup_django,
    )

    setup_django()
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    call_command("migrate", verbosity=0)
    slug = f"bench-profile-{int(time.time())}"
    pairs = args.votes + args.warmup + 10
    tokens = create_fixture(slug=slug, pairs=pairs, overlap=args.overlap, annotators=args.overlap)
    if args.webhook:
        from annotation.models import Project
        from annotation.webhooks.services import webhook_create

        project = Project.objects.get(slug=slug)
        webhook_create(project=project, url="http://127.0.0.1:9/hook", events=["pair.decided"])
    with connection.cursor() as cursor:
        analyze_as_autovacuum_would(cursor)
    application = get_wsgi_application()
    try:
        # The annotators take turns, so one vote in ``overlap`` completes its pair.
        current = {}
        for token in tokens:
            code, current[token] = wsgi_post(
                application, f"/api/v1/projects/{slug}/claim/", {}, token
            )
            if code != 200:
                raise SystemExit(f"claim answered {code}")
        turn = 0

        def vote() -> None:
            nonlocal turn
            token = tokens[turn % len(tokens)]
            turn += 1
            code, answer = wsgi_post(
                application,
                f"/api/v1/assignments/{current[token]['id']}/vote/",
                {"choice": "left", "time_on_task_ms": 4000, "next": True},
                token,
            )
            if code != 201 or answer.get("next") is None:
                raise SystemExit(f"vote answered {code}: {answer}")
            current[token] = answer["next"]

        for _ in range(args.warmup):
            vote()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = psutil.Process(cursor.fetchone()[0])
        counts = []
        for _ in tokens:  # one vote in ``overlap`` completes a pair: the statements vary
            with CaptureQueriesContext(connection) as captured:
                vote()
            counts.append(len(captured.captured_queries))
        statements = "/".join(str(count) for count in counts)
        # CPU time, not wall time: the waits on the database are not the web process's cost.
        profiler = cProfile.Profile(time.process_time) if args.profile else None
        backend_started = sum(backend.cpu_times()[:2])
        cpu_started, wall_started = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        for _ in range(args.votes):
            vote()
        if profiler:
            profiler.disable()
        cpu = time.process_time() - cpu_started
        wall = time.perf_counter() - wall_started
        database = sum(backend.cpu_times()[:2]) - backend_started
    finally:
        connection.close()
        delete_project(slug)
    per = 1000 / args.votes
    print(f"votes with next:     {args.votes}")
    print(f"web process CPU ms:  {cpu * per:6.2f} a request" + (" (profiled)" if profiler else ""))
    print(f"database CPU ms:     {database * per:6.2f} a request")
    print(f"wall ms:             {wall * per:6.2f} a request")
    print(f"statements:          {statements} a request, by turn")
    if profiler:
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats(os.environ.get("PROFILE_SORT", "tottime")).print_stats(args.profile)


if __name__ == "__main__":
    main()
