"""A curator sends a large pairs file from Chromium straight to the bucket (moto's server),
in parts (docs/curators.md, "Large files straight to the bucket"): the upload is cut off
when one part keeps failing, the page is reloaded, the same file chosen again resumes it
(only the missing part is sent, a failed try sent again), and the import runs from the
stored file, which is gone from the bucket afterwards."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest

from annotation.imports.direct import MIN_PART_BYTES
from annotation.models import ImportJob, Pair
from tests.annotation.imports.conftest import text_pair
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _pairs_file(path, size: int):
    filler = "y" * 40_000
    with open(path, "w", encoding="utf-8") as out:
        written, n = 0, 0
        while written < size:
            line = json.dumps(text_pair(f"big-{n}", prompt=filler)) + "\n"
            written += out.write(line)
            n += 1
    return path, n


def _part_of(request) -> int | None:
    if request.method != "PUT":
        return None
    return int(parse_qs(urlparse(request.url).query)["partNumber"][0])


def test_a_large_file_goes_to_the_bucket_in_parts_survives_a_reload_and_is_imported(
    live_server, page, screenshot, s3_storage, project, carol, settings, tmp_path
):
    settings.ARBITER_UPLOAD_PART_BYTES = MIN_PART_BYTES
    s3_storage.client.put_bucket_cors(
        Bucket=s3_storage.bucket,
        CORSConfiguration={
            "CORSRules": [
                {
                    "AllowedOrigins": [live_server.url],
                    "AllowedMethods": ["PUT"],
                    "AllowedHeaders": ["*"],
                    "MaxAgeSeconds": 3000,
                }
            ]
        },
    )
    path, pairs = _pairs_file(tmp_path / "large.jsonl", 2 * MIN_PART_BYTES + 300_000)
    bucket = f"{s3_storage.server.url}/**"
    sent: list[int] = []

    def cut_off_part_two(route):
        part = _part_of(route.request)
        if part is not None:
            sent.append(part)
        if part == 2:
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route(bucket, cut_off_part_two)
    log_in(page, live_server, "carol", f"/p/{project.slug}/imports/")
    page.set_input_files("#direct-file", str(path))
    page.get_by_role("button", name="Upload and import").click()
    status = page.locator("[data-upload-status]")
    status.filter(has_text="The upload stopped").wait_for(timeout=30_000)
    screenshot(page, "direct-upload-stopped")
    assert sorted(set(sent)) == [1, 2, 3]
    assert sent.count(2) == 4  # tried four times before giving up
    assert not ImportJob.objects.exists()

    page.unroute(bucket)
    resent: list[int] = []
    failed_once: set[int] = set()

    def flaky_once(route):
        part = _part_of(route.request)
        if part is not None:
            resent.append(part)
            if part not in failed_once:
                failed_once.add(part)
                route.abort("connectionreset")
                return
        route.continue_()

    page.route(bucket, flaky_once)
    page.reload()
    page.set_input_files("#direct-file", str(path))
    page.get_by_role("button", name="Upload and import").click()
    page.wait_for_url(f"{live_server.url}/p/{project.slug}/imports/?job=*", timeout=60_000)
    # Only the missing part went again: once cut off, once through.
    assert resent == [2, 2]
    job = ImportJob.objects.get()
    assert job.status == ImportJob.Status.SUCCEEDED, job.errors
    assert Pair.objects.filter(project=project).count() == pairs
    assert f"Created {pairs} pairs" in " ".join(page.locator(".import-job").inner_text().split())
    assert s3_storage.keys("uploads") == []
    assert page.evaluate("Object.keys(localStorage)") == []
    screenshot(page, "direct-upload-imported")
