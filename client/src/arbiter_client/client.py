"""``Client``: Arbiter's REST API (docs/api.md) as Python calls."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from arbiter_client import jobs
from arbiter_client.errors import IntegrityError
from arbiter_client.files import check_file, safe_destination, write_jsonl, zip_folder
from arbiter_client.transport import DEFAULT_RETRIES, Transport

Json = dict[str, Any]
# What an annotator's script answers for an assignment: the vote's fields
# ({"choice": "left"} or {"value": 4}, with "rationale" optionally).
Decide = Callable[[Json], Json]


class Client:
    """A session with one Arbiter server, as the user whose API token it holds.

    Lists are iterators over every page; refusals raise ``ApiError`` subclasses with the
    API's body; 429 and 503 are retried after the server's ``Retry-After`` (``retries``
    times)."""

    def __init__(self, url: str, token: str, *, retries: int = DEFAULT_RETRIES, **options: Any):
        self.transport = Transport(url, token, retries=retries, **options)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.transport.close()

    def _get(self, path: str, **params: Any) -> Any:
        return self.transport.json("GET", path, params=params or None)

    def _post(self, path: str, body: Json | None = None, **params: Any) -> Any:
        return self.transport.json("POST", path, json=body, params=params or None)

    # Projects and pairs ----------------------------------------------------------------

    def projects(self) -> Iterator[Json]:
        return self.transport.pages("projects/")

    def project(self, slug: str) -> Json:
        return self._get(f"projects/{slug}/")

    def pairs(
        self,
        slug: str,
        *,
        status: str | None = None,
        task: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Json]:
        """Every pair (curators and researchers), ``page_size`` a request (the server's 100
        unless told)."""
        params = {"status": status, "task": task, "limit": page_size}
        return self.transport.pages(
            f"projects/{slug}/pairs/", {k: v for k, v in params.items() if v}
        )

    def pair(self, slug: str, pair_id: str) -> Json:
        return self._get(f"projects/{slug}/pairs/{pair_id}/")

    def adjudicate(self, slug: str, pair_id: str, *, label: str, note: str) -> Json:
        return self._post(
            f"projects/{slug}/pairs/{pair_id}/adjudicate/", {"label": label, "note": note}
        )

    def exclude_pair(self, slug: str, pair_id: str, *, reason: str) -> Json:
        """Takes the pair out of serving, consensus, releases and every figure (curators)."""
        return self._post(f"projects/{slug}/pairs/{pair_id}/exclude/", {"reason": reason})

    def include_pair(self, slug: str, pair_id: str) -> Json:
        """Gives an excluded pair back the status it had (curators)."""
        return self._post(f"projects/{slug}/pairs/{pair_id}/include/")

    # Imports ---------------------------------------------------------------------------

    def import_file(
        self,
        slug: str,
        path: str | Path,
        *,
        media: str | Path | None = None,
        wait: bool = True,
        progress: bool = True,
    ) -> Json:
        """Imports a pairs file (JSON Lines, MMRB2's JSON, an Omni-RewardBench task file);
        ``media`` is an archive (.zip, .tar.gz) or a folder (zipped here) with the files its
        paths name. The job, finished when ``wait``; ``BadRequest`` lists refused lines."""
        path = Path(path)
        with tempfile.TemporaryDirectory(prefix="arbiter-import-") as scratch:
            archive = Path(media) if media is not None else None
            if archive is not None and archive.is_dir():
                archive = zip_folder(archive, Path(scratch) / "media.zip")

            def open_files() -> dict[str, tuple[str, Any]]:
                files = {"file": (path.name, path.open("rb"))}
                if archive is not None:
                    files["media_archive"] = (archive.name, archive.open("rb"))
                return files

            job = self.transport.json("POST", f"projects/{slug}/imports/", open_files=open_files)
        return self.wait_import(slug, job["id"], progress=progress) if wait else job

    def import_dataset(
        self, slug: str, dataset: Any, *, name: str = "dataset.jsonl", **options: Any
    ) -> Json:
        """Imports the rows of a ``datasets.Dataset`` (or any iterable of dicts) whose columns
        are the import format's fields, written to JSON Lines and uploaded."""
        with tempfile.TemporaryDirectory(prefix="arbiter-dataset-") as scratch:
            path = Path(scratch) / name
            write_jsonl(dataset, path)
            return self.import_file(slug, path, **options)

    def imports(self, slug: str) -> Iterator[Json]:
        return self.transport.pages(f"projects/{slug}/imports/")

    def import_job(self, slug: str, job_id: int) -> Json:
        return self._get(f"projects/{slug}/imports/{job_id}/")

    def wait_import(self, slug: str, job_id: int, **options: Any) -> Json:
        return jobs.wait_for(jobs.IMPORT, lambda: self.import_job(slug, job_id), **options)

    # Judges: filter runs and evaluations -----------------------------------------------

    def start_filter_run(
        self,
        slug: str,
        judges: list[str],
        *,
        wait: bool = True,
        progress: bool = True,
        **options: Any,
    ) -> Json:
        """Starts a filter run with these judges (``threshold``, ``min_valid_votes``,
        ``budget_per_task``, ``pairs`` as the API takes them); finished when ``wait``."""
        run = self._post(f"projects/{slug}/filter-runs/", {"judges": judges, **options})
        return self.wait_filter_run(slug, run["id"], progress=progress) if wait else run

    def filter_runs(self, slug: str) -> Iterator[Json]:
        return self.transport.pages(f"projects/{slug}/filter-runs/")

    def filter_run(self, slug: str, number: int) -> Json:
        return self._get(f"projects/{slug}/filter-runs/{number}/")

    def wait_filter_run(self, slug: str, number: int, **options: Any) -> Json:
        return jobs.wait_for(jobs.FILTER_RUN, lambda: self.filter_run(slug, number), **options)

    def cancel_filter_run(self, slug: str, number: int) -> Json:
        return self._post(f"projects/{slug}/filter-runs/{number}/cancel/")

    def resume_filter_run(self, slug: str, number: int) -> Json:
        return self._post(f"projects/{slug}/filter-runs/{number}/resume/")

    def evaluate_judge(
        self,
        slug: str,
        judge: str,
        *,
        release: str = "",
        wait: bool = True,
        progress: bool = True,
        **options: Any,
    ) -> Json:
        """Scores a judge on a release (``""`` the current consensus, ``"reference"`` the
        imported labels); the evaluation, finished when ``wait``."""
        evaluation = self._post(
            f"projects/{slug}/judge-evaluations/", {"judge": judge, "release": release, **options}
        )
        if not wait:
            return evaluation
        return jobs.wait_for(
            jobs.EVALUATION,
            lambda: self.judge_evaluation(slug, evaluation["id"]),
            progress=progress,
        )

    def judge_evaluation(self, slug: str, evaluation_id: int) -> Json:
        return self._get(f"projects/{slug}/judge-evaluations/{evaluation_id}/")

    def judge_leaderboard(self, slug: str, *, release: str | None = None) -> Iterator[Json]:
        return self.transport.pages(
            f"projects/{slug}/judge-evaluations/", {"release": release} if release else None
        )

    # Agreement -------------------------------------------------------------------------

    def agreement(self, slug: str, *, source: str = "all") -> Json:
        return self._get(f"projects/{slug}/agreement/", source=source)

    def recompute_agreement(self, slug: str, *, source: str = "all") -> Json:
        return self._post(f"projects/{slug}/agreement/", source=source)

    # Releases --------------------------------------------------------------------------

    def releases(self, slug: str) -> Iterator[Json]:
        return self.transport.pages(f"projects/{slug}/releases/")

    def release(self, slug: str, version: str) -> Json:
        return self._get(f"projects/{slug}/releases/{version}/")

    def create_release(
        self,
        slug: str,
        version: str,
        *,
        selection: Json | None = None,
        wait: bool = True,
        progress: bool = True,
    ) -> Json:
        """A new release with this selection (docs/releases.md), built when ``wait``."""
        release = self._post(
            f"projects/{slug}/releases/", {"version": version, "selection": selection or {}}
        )
        return self.wait_release(slug, version, progress=progress) if wait else release

    def build_release(
        self, slug: str, version: str, *, wait: bool = True, progress: bool = True
    ) -> Json:
        self._post(f"projects/{slug}/releases/{version}/build/")
        return (
            self.wait_release(slug, version, progress=progress)
            if wait
            else self.release(slug, version)
        )

    def wait_release(self, slug: str, version: str, **options: Any) -> Json:
        return jobs.wait_for(jobs.RELEASE, lambda: self.release(slug, version), **options)

    def publish_release(self, slug: str, version: str) -> Json:
        return self._post(f"projects/{slug}/releases/{version}/publish/")

    def release_files(self, slug: str, version: str) -> Iterator[Json]:
        return self.transport.pages(f"projects/{slug}/releases/{version}/files/")

    def download_release(self, slug: str, version: str, folder: str | Path) -> Path:
        """Every file of a published release into ``folder``, each checked against the size
        and sha256 the release lists, and the manifest against the release's
        ``manifest_sha256`` (``IntegrityError`` otherwise); the folder."""
        folder = Path(folder)
        release = self.release(slug, version)
        for entry in self.release_files(slug, version):
            destination = safe_destination(folder, entry["name"])
            destination.parent.mkdir(parents=True, exist_ok=True)
            self.transport.download(entry["url"], destination)
            check_file(destination, size=entry["size"], sha256=entry["sha256"])
            if entry["name"] == "manifest.json" and entry["sha256"] != release["manifest_sha256"]:
                raise IntegrityError(
                    f"manifest.json is not the manifest release {version} recorded"
                )
        return folder

    # Annotating (scripted annotators) --------------------------------------------------

    def claim(self, slug: str) -> Json | None:
        """A lease on the next pair for me, or None when nothing is left for me."""
        return self._post(f"projects/{slug}/claim/")

    def vote(self, assignment_id: int, *, claim_next: bool = False, **vote: Any) -> Json:
        """Votes (``choice`` or ``value``, ``rationale``, ``time_on_task_ms``); with
        ``claim_next`` the answer's ``next`` is the next assignment, in the same request."""
        body = {**vote, "next": True} if claim_next else vote
        return self._post(f"assignments/{assignment_id}/vote/", body)

    def skip(self, assignment_id: int, *, reason: str, note: str = "") -> Json:
        return self._post(f"assignments/{assignment_id}/skip/", {"reason": reason, "note": note})

    def undo(self, slug: str) -> Json:
        return self._post(f"projects/{slug}/undo/")

    def my_votes(
        self, slug: str, *, since: str | None = None, until: str | None = None
    ) -> Iterator[Json]:
        """My own votes in the project, newest first, as I gave them; ``since`` and ``until``
        (``YYYY-MM-DD``, both included) pick days."""
        params = {"since": since, "until": until}
        return self.transport.pages(
            f"projects/{slug}/me/votes/", {k: v for k, v in params.items() if v}
        )

    def my_speed(self, slug: str) -> Json:
        """My median seconds per vote and votes per hour over my latest sessions."""
        return self._get(f"projects/{slug}/me/speed/")

    def flag(self, assignment_id: int, *, kind: str, note: str = "", skip: bool = False) -> Json:
        """Flags the assignment's pair for the curators (``broken_media``, ``ambiguous_prompt``,
        ``identical``, ``other`` with a note); with ``skip`` also skips it."""
        body = {"kind": kind, "note": note, "skip": skip}
        return self._post(f"assignments/{assignment_id}/flag/", body)

    def my_flags(self, slug: str) -> list[Json]:
        """My flags in the project, newest first, with the curators' replies."""
        return self._get(f"projects/{slug}/my-flags/")

    # Flags (curators) ------------------------------------------------------------------

    def flags(self, slug: str, *, state: str = "open") -> list[Json]:
        """The project's flags: ``open`` (the default), ``resolved`` or ``all``."""
        return self._get(f"projects/{slug}/flags/", state=state)

    def reply_to_flag(self, slug: str, flag_id: int, text: str, *, resolve: bool = False) -> Json:
        """A reply its author reads in My flags; ``resolve`` also resolves the flag."""
        body = {"text": text, "resolve": resolve}
        return self._post(f"projects/{slug}/flags/{flag_id}/replies/", body)

    def resolve_flag(self, slug: str, flag_id: int) -> Json:
        return self._post(f"projects/{slug}/flags/{flag_id}/resolve/")

    # Audit log (curators, operators) ------------------------------------------------------

    def audit(
        self,
        slug: str,
        *,
        actor: str | None = None,
        action: str | None = None,
        since: str | None = None,
        until: str | None = None,
        page_size: int | None = None,
    ) -> Iterator[Json]:
        """The project's audit log, newest first: who changed what, with the changed fields
        before and after; ``actor`` (a username), ``action`` (``flag.resolved``, ...) and
        ``since`` and ``until`` (``YYYY-MM-DD``, both included) pick events, ``page_size`` a
        request (the server's 50 unless told)."""
        params = {
            "actor": actor,
            "action": action,
            "since": since,
            "until": until,
            "limit": page_size,
        }
        return self.transport.pages(
            f"projects/{slug}/audit/", {k: v for k, v in params.items() if v}
        )

    def annotate(self, slug: str, decide: Decide, *, limit: int | None = None) -> int:
        """Claims and votes until nothing is left (or ``limit`` votes), one request per vote:
        ``decide(assignment)`` returns the vote's fields. The number of votes sent."""
        assignment = self.claim(slug)
        sent = 0
        while assignment is not None and (limit is None or sent < limit):
            answer = self.vote(assignment["id"], claim_next=True, **decide(assignment))
            sent += 1
            assignment = answer.get("next")
        return sent


def open_release(folder: str | Path) -> Any:
    """A downloaded release as a ``datasets.DatasetDict`` (its card names the configs and
    splits); needs ``pip install 'arbiter-client[datasets]'``."""
    try:
        from datasets import load_dataset
    except ImportError as missing:
        raise ImportError(
            "open_release needs datasets: pip install 'arbiter-client[datasets]'"
        ) from missing
    return load_dataset(str(folder))
