"""How fast a filter run gets through its judge calls (issue 36, "The filter run").

Starts the loopback OpenAI-compatible server (answering after ``--delay-ms``), creates text
pairs and OpenAI-compatible judges in a throw-away project on the database named by
DATABASE_URL, starts ONE Celery worker on the broker named by CELERY_BROKER_URL (Redis), runs a
filter over judges x 2 orders x pairs calls and prints, as one JSON object, its settings, the
machine's core count, the limit the judges' concurrency sets (calls x delay / (judges x
concurrency): every judge's calls all in flight the whole time) and Arbiter's figures measured
in the same run: seconds, calls/s, the most requests the server saw in flight, the CPU a call
costs the worker and PostgreSQL beyond the judge's own time (docs/scaling.md), the CPU of this
process (the loopback server's, mostly) and the peak RSS of each of the worker's processes.
The defaults are issue 36's: 3 judges x 2 orders x 2,000 pairs, 100 ms a call, 32 concurrent
calls a judge, one worker started as ``celery -A config worker -c 2 -Q
default,judges_http,judges_gpu``; limit 12.5 s, goal <= 15 s. Then it times the reward-model
judge backend on CPU in responses/s (target >= 2,000 with a small model), also as one JSON
object.

    DATABASE_URL=postgres://... CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
        python benchmarks/judge_filter.py --skip-reward-model

``--profile FILE`` records the worker's processes with py-spy (``pip install py-spy``) into
FILE (collapsed stacks, one a line with its sample count); the run's timings then include
py-spy's own cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT_SLUG = "bench-judge-filter"


def setup_django(args) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "false")  # DEBUG keeps every query in memory
    os.environ.setdefault("ARBITER_LOG_LEVEL", "WARNING")
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
    if args.batch_pairs is not None:
        os.environ["ARBITER_JUDGE_BATCH_PAIRS"] = str(args.batch_pairs)
    import django

    django.setup()


def clear() -> None:
    """Deletes what an earlier run of this benchmark left (pairs protect their content)."""
    from annotation.models import Pair, Project, Prompt, Response
    from judges.models import FilterRun, Judge

    mine = {"project__slug": PROJECT_SLUG}
    FilterRun.objects.filter(**mine).delete()
    for model in (Pair, Prompt, Response):
        model.objects.filter(**mine).delete()
    Project.objects.filter(slug=PROJECT_SLUG).delete()
    Judge.objects.filter(name__startswith="bench-").delete()


def make_project(n_pairs: int):
    """A fresh project with ``n_pairs`` imported text pairs (half favour A, half B)."""
    from annotation.core.content import prompt_id, response_id, text_part
    from annotation.models import Pair, Project, Prompt, Response

    clear()
    project = Project.objects.create(slug=PROJECT_SLUG, name="Judge filter benchmark")
    prompts, responses, pairs = [], [], []
    for i in range(n_pairs):
        good, weak = f"GOOD answer to question {i}.", f"A weak answer to question {i}."
        first, second = (good, weak) if i % 2 == 0 else (weak, good)
        question = [text_part(f"Question {i}: which answer is right?")]
        prompt = Prompt(id=prompt_id(project.pk, question), project=project, content=question)
        a = Response(
            id=response_id(project.pk, "m1", [text_part(first)]),
            project=project,
            model_name="m1",
            content=[text_part(first)],
        )
        b = Response(
            id=response_id(project.pk, "m2", [text_part(second)]),
            project=project,
            model_name="m2",
            content=[text_part(second)],
        )
        prompts.append(prompt)
        responses += [a, b]
        pairs.append(
            Pair(
                project=project,
                external_id=f"bench-{i}",
                prompt=prompt,
                response_a=a,
                response_b=b,
                task="reasoning",
                target_votes=3,
            )
        )
    Prompt.objects.bulk_create(prompts, batch_size=1000)
    Response.objects.bulk_create(responses, batch_size=1000)
    Pair.objects.bulk_create(pairs, batch_size=1000)
    return project


def start_worker(args) -> subprocess.Popen:
    env = {
        **os.environ,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "ARBITER_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    log = open(args.worker_log, "w")  # noqa: SIM115 - lives as long as the worker
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "--loglevel=WARNING",
        f"--concurrency={args.worker_concurrency}",
        "-Q",
        args.queues,
        "--without-gossip",
        "--without-mingle",
        "-n",
        f"bench-{os.getpid()}@%h",
    ]
    if args.profile:
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        profile = [py_spy, "record", "--subprocesses", "--format", "raw", "--rate", "50"]
        command = [*profile, "-o", args.profile, "--", *command]
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_worker(worker: subprocess.Popen, timeout: float = 60) -> None:
    from config.celery import app

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise SystemExit("the Celery worker exited; see --worker-log")
        if app.control.ping(timeout=0.5):
            return
    raise SystemExit(f"no Celery worker answered within {timeout:.0f}s")


def worker_peak_rss_mb(session: int) -> list[float]:
    """The peak resident memory (Linux's VmHWM) of each process of the worker started in its
    own session ``session`` (the main process first, then its pool's), in MB; read before the
    worker is stopped. Empty where /proc is not there."""
    peaks = []
    for entry in sorted(Path("/proc").iterdir(), key=lambda path: path.name):
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[3]) != session:  # the session id
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024
                    peaks.append((int(entry.name) != session, peak))
        except (OSError, ValueError, IndexError):
            continue  # a process that ended meanwhile
    return [peak for _, peak in sorted(peaks, key=lambda item: item[0])]


def own_cpu() -> float:
    """CPU seconds (user + system) of this process alone, its children left out."""
    import psutil

    times = psutil.Process().cpu_times()
    return times.user + times.system


def bench_filter(args) -> None:
    from annotator_load import database_backends_cpu, process_tree_cpu
    from django.conf import settings
    from django.db.models import Max

    from judges.models import Judge, Verdict
    from judges.runs.services import filter_run_create
    from tests.judges.fake_openai import FakeOpenAI, by_marker

    project = make_project(args.pairs)
    with FakeOpenAI(by_marker("GOOD"), delay_s=args.delay_ms / 1000) as server:
        judges = [
            Judge.objects.create(
                name=f"bench-judge-{n}",
                kind="openai",
                base_url=server.base_url,
                model=f"bench-model-{n}",
                concurrency=args.judge_concurrency,
                timeout_s=30,
            )
            for n in range(args.judges)
        ]
        worker = start_worker(args)
        try:
            wait_for_worker(worker)
            worker_cpu, backends_seen = process_tree_cpu(worker.pid), database_backends_cpu()
            backends_before = dict(backends_seen)
            # The loopback server's thread runs in this process: its CPU is the server's,
            # mostly. This process alone: the worker is its child, counted above.
            server_cpu = own_cpu()
            load_before = [round(x, 2) for x in os.getloadavg()]
            started = time.perf_counter()
            run = filter_run_create(project=project, judges=judges)
            while True:
                time.sleep(0.1)
                backends_seen.update(database_backends_cpu())  # those the run opens, too
                run.refresh_from_db()
                if run.finished:
                    break
            elapsed = time.perf_counter() - started
            worker_cpu = process_tree_cpu(worker.pid) - worker_cpu
            server_cpu = own_cpu() - server_cpu
            backends_seen.update(database_backends_cpu())
            database_cpu = sum(
                cpu - backends_before.get(pid, 0) for pid, cpu in backends_seen.items()
            )
            peaks = worker_peak_rss_mb(worker.pid)
        finally:
            # py-spy writes its profile on SIGINT, which stops the worker as SIGTERM does.
            os.killpg(worker.pid, signal.SIGINT if args.profile else signal.SIGTERM)
            worker.wait(timeout=30)
        calls = args.judges * 2 * args.pairs
        last = Verdict.objects.filter(run=run).aggregate(last=Max("created_at"))["last"]
        finalize = (run.finished_at - last).total_seconds() if last else 0.0
        limit = calls * args.delay_ms / 1000 / (args.judges * args.judge_concurrency)
        report = {
            "benchmark": "judge_filter",
            "settings": {
                "pairs": args.pairs,
                "judges": args.judges,
                "orders": 2,
                "calls": calls,
                "delay_ms": args.delay_ms,
                "judge_concurrency": args.judge_concurrency,
                "worker": f"celery -A config worker -c {args.worker_concurrency} -Q {args.queues}",
                "batch_pairs": settings.ARBITER_JUDGE_BATCH_PAIRS,
                "profiled": bool(args.profile),
            },
            "cores": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "limit_s": round(limit, 2),
            "goal_s": round(limit * 1.2, 2),
            "status": run.status,
            "error": run.error,
            "seconds": round(elapsed, 2),
            "times_limit": round(elapsed / limit, 2),
            "calls_per_s": round(calls / elapsed, 1),
            "requests_served": server.request_count,
            "max_in_flight": server.max_in_flight,
            "finish_s": round(finalize, 2),
            "easy": run.summary.get("easy"),
            "queued": run.summary.get("queued"),
            "worker_cpu_ms_per_call": round(worker_cpu * 1000 / calls, 3),
            "postgres_cpu_ms_per_call": round(database_cpu * 1000 / calls, 3),
            "server_cpu_ms_per_call": round(server_cpu * 1000 / calls, 3),
            "worker_peak_rss_mb": [round(peak) for peak in peaks],
        }
        print(json.dumps(report), flush=True)
    if not args.keep:
        clear()


def bench_reward_model(args) -> None:
    import torch
    from django.conf import settings

    from judges.backends import get_backend
    from judges.backends.base import JudgeItem
    from judges.models import Judge
    from judges.reward_model.model import init_checkpoint

    # The backend loads checkpoints only from under ARBITER_CHECKPOINT_ROOT.
    settings.ARBITER_CHECKPOINT_ROOT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=settings.ARBITER_CHECKPOINT_ROOT) as folder:
        checkpoint = init_checkpoint(Path(folder) / "rm.pt")
        judge = Judge(
            name="bench-rm",
            kind="reward_model",
            checkpoint=str(checkpoint),
            device="cpu",
            batch_size=args.rm_batch_size,
        )
        items = [
            JudgeItem(
                pair_id=i,
                order=order,
                task="reasoning",
                prompt=[{"type": "text", "text": f"Question {i}: which answer is right?"}],
                first=[{"type": "text", "text": texts[0]}],
                second=[{"type": "text", "text": texts[1]}],
            )
            for i in range(args.rm_pairs)
            for order, texts in (
                ("AB", (f"GOOD answer to question {i}.", f"A weak answer to question {i}.")),
                ("BA", (f"A weak answer to question {i}.", f"GOOD answer to question {i}.")),
            )
        ]
        backend = get_backend(judge)
        try:
            backend.judge_batch(items[:8])  # loads the model
            started = time.perf_counter()
            results = backend.judge_batch(items)
            elapsed = time.perf_counter() - started
        finally:
            backend.close()
    responses = 2 * args.rm_pairs  # distinct responses; each is scored once per batch
    report = {
        "benchmark": "judge_filter reward model",
        "settings": {"pairs": args.rm_pairs, "orders": 2, "batch_size": args.rm_batch_size},
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "ok": sum(r.outcome == "ok" for r in results),
        "responses": responses,
        "seconds": round(elapsed, 2),
        "responses_per_s": round(responses / elapsed),
        "target_responses_per_s": 2000,
    }
    print(json.dumps(report), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--judges", type=int, default=3)
    parser.add_argument("--delay-ms", type=int, default=100, help="the server's answer delay")
    parser.add_argument("--worker-concurrency", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--queues", default="default,judges_http,judges_gpu", help="the queues the worker serves"
    )
    parser.add_argument(
        "--judge-concurrency", type=int, default=32, help="each judge's concurrency setting"
    )
    parser.add_argument(
        "--batch-pairs", type=int, help="pairs per batch task (ARBITER_JUDGE_BATCH_PAIRS)"
    )
    parser.add_argument("--rm-pairs", type=int, default=2000, help="pairs for the reward model")
    parser.add_argument("--rm-batch-size", type=int, default=256)
    parser.add_argument("--skip-reward-model", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark project")
    parser.add_argument("--worker-log", default=os.devnull, help="where the worker logs go")
    parser.add_argument("--profile", help="record the worker with py-spy into this file")
    args = parser.parse_args()
    if not os.environ.get("CELERY_BROKER_URL", "").startswith("redis"):
        raise SystemExit("set CELERY_BROKER_URL=redis://... (the worker needs a real broker)")
    setup_django(args)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    bench_filter(args)
    if not args.skip_reward_model:
        bench_reward_model(args)


if __name__ == "__main__":
    main()
