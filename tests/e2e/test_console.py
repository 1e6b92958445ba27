"""The web console (/console) in a real headless browser (Debian's Chromium, `.ci/setup-browser`)
against the running service, and the page-image route it shows scans with.

Screenshots of the main screens are written to $CONSOLE_SCREENSHOTS when it is set (the
ones in docs/console/ come from `CONSOLE_SCREENSHOTS=docs/console`), else to a temporary
folder, so an ordinary run does not rewrite committed files.
"""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import numpy as np
import pytest
from PIL import Image

from ocr_worker.imaging import PageRasterizer
from tests.e2e.conftest import Service
from tests.e2e.helpers import submit, wait_for
from tests.e2e.processes import wait_until
from tests.factories import sample_pages, scanned_pdf
from uocr_core.tenants import CreatedKey

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver import Chrome  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402

T = TypeVar("T")
# The test stack's page groups (size 3, overlap 1) of a 6-page document output these pages.
GROUPS_OF_SIX = ({1, 2, 3}, {4, 5}, {6})


# ---------------------------------------------------------------------------- the image route


def _image(response: httpx.Response) -> Image.Image:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/jpeg"
    return Image.open(io.BytesIO(response.content))


def test_page_image_is_the_scan_the_worker_read_cached_and_private(service: Service) -> None:
    owner, other = service.stack.new_tenant(), service.stack.new_tenant()
    with service.client(owner) as client:
        job_id = submit(client, scanned_pdf(sample_pages(3, lines=3), seed=11)).json()["id"]
        job, _ = wait_for(client, job_id)
        assert job["status"] == "succeeded"
        worker = PageRasterizer(service.stack.store, dpi=150, max_side=4000)
        images = []
        for page_no in (1, 2, 3):
            page = client.get(f"/v1/jobs/{job_id}/pages/{page_no}").json()
            response = client.get(f"/v1/jobs/{job_id}/pages/{page_no}/image")
            image = _image(response)
            # The blocks' boxes are in pixels of this very image: the worker's render.
            assert image.size == (page["width"], page["height"])
            expected = worker.render(f"jobs/{job_id}/input/000.pdf", page_no - 1)  # (H, W, 3)
            pixels = np.asarray(image.convert("RGB"), dtype=np.int16)
            assert np.abs(pixels - expected.astype(np.int16)).mean() < 4
            images.append(response.content)
        assert len(set(images)) == 3

        url = f"/v1/jobs/{job_id}/pages/2/image"
        first = client.get(url)
        assert first.headers["cache-control"].startswith("private, max-age=")
        again = client.get(url, headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        narrow = _image(client.get(url, params={"width": 300}))
        full = _image(first)
        assert narrow.width == 300
        assert abs(narrow.height - full.height * 300 / full.width) <= 1
        assert client.get(url, params={"width": 300}).headers["etag"] != first.headers["etag"]

        assert client.get(f"/v1/jobs/{job_id}/pages/4/image").status_code == 404
        assert client.get(url, params={"size": 3}).status_code == 422
        assert client.get(url, headers={"Accept": "application/json"}).status_code == 406
    with service.client(other) as stranger:
        refused = stranger.get(url)
        assert refused.status_code == 404
        assert refused.headers["content-type"] == "application/problem+json"
        assert (
            stranger.get(url, headers={"If-None-Match": first.headers["etag"]}).status_code == 404
        )


# ----------------------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("CONSOLE_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("console-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    path = tmp_path / "downloads"
    path.mkdir()
    return path


@pytest.fixture
def browser(downloads: Path) -> Iterator[Chrome]:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        message = "Chromium and chromedriver are not installed: run `bash .ci/setup-browser`"
        if os.environ.get("UOCR_REQUIRE_SERVICES"):
            pytest.fail(message)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,800",
        "--force-device-scale-factor=1",
        "--lang=en-GB",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(driver_path))
    # The page itself 1280x800, whatever the window's frame takes (the screenshots' size).
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False},
    )
    driver.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    try:
        yield driver
    finally:
        driver.quit()


def _wait(predicate: Callable[[], T | None], timeout: float = 30, what: str = "it") -> T:
    """Poll until predicate() returns something truthy (stale elements mean: not yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except StaleElementReferenceException:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"waited {timeout}s for {what}")


def _find(driver: WebDriver, css: str, timeout: float = 30) -> WebElement:
    return _wait(lambda: next(iter(driver.find_elements(By.CSS_SELECTOR, css)), None), timeout, css)


def _shot(driver: WebDriver, folder: Path, name: str) -> None:
    """A 1280x800 screenshot, reduced to 256 colours so the committed copies stay small."""
    image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(
        folder / f"{name}.png", optimize=True
    )


def _sign_in(driver: WebDriver, service: Service, tenant: CreatedKey) -> None:
    driver.get(f"{service.api_url}/console/")
    _find(driver, "#api-key").send_keys(tenant.api_key, Keys.ENTER)
    _find(driver, "#jobs")


def _succeeded_pages(driver: WebDriver) -> frozenset[int]:
    cells = driver.find_elements(By.CSS_SELECTOR, ".page-cell.status-succeeded")
    return frozenset(int(cell.get_attribute("data-page") or 0) for cell in cells)


def _watch_grid_fill(
    driver: WebDriver, total: int, on_partial: Callable[[], None], timeout: float = 240
) -> list[frozenset[int]]:
    """Every distinct set of finished pages the grid showed, until all were done;
    on_partial() runs when the first partly filled grid shows."""
    seen: list[frozenset[int]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done = _succeeded_pages(driver)
        except StaleElementReferenceException:
            continue
        if not seen or seen[-1] != done:
            seen.append(done)
            if 0 < len(done) < total and not any(0 < len(d) < total for d in seen[:-1]):
                on_partial()
        if len(done) == total:
            return seen
        time.sleep(0.05)
    raise TimeoutError(f"the grid showed only {seen[-1] if seen else 'nothing'}")


def _console_errors(driver: Chrome) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def test_console_upload_watch_read_download_cancel_and_tenancy(
    service: Service, browser: Chrome, screenshots: Path, downloads: Path, tmp_path: Path
) -> None:
    owner, other = service.stack.new_tenant(), service.stack.new_tenant()
    scan = tmp_path / "minutes-1962.pdf"
    scan.write_bytes(scanned_pdf(sample_pages(6, lines=5, seed=4), seed=4))
    damaged = _submit_damaged(service, owner)  # runs behind the upload, read at the end

    browser.get(f"{service.api_url}/console/")
    _find(browser, "#api-key").send_keys(owner.api_key)
    _shot(browser, screenshots, "sign-in")
    browser.find_element(By.ID, "sign-in").click()
    _find(browser, "#jobs")
    assert browser.execute_script("return sessionStorage.getItem('uocr.apiKey')") == owner.api_key

    job_id = _upload_and_watch(browser, scan, screenshots)
    _check_job_view(browser, service, owner, job_id, screenshots, downloads)
    _check_page_view(browser, service, owner, job_id, screenshots)
    _check_search(browser, service, owner, job_id, screenshots)
    canceled = _cancel_another_job(browser, service, owner, screenshots)
    _check_failed_page(browser, service, owner, damaged)
    _check_review_list(browser, service, owner, damaged, screenshots)
    _check_jobs_list(browser, [canceled, job_id, damaged], screenshots)

    assert owner.api_key not in browser.current_url
    errors = _console_errors(browser)
    assert not [e for e in errors if "Content Security Policy" in e], errors

    browser.find_element(By.ID, "sign-out").click()
    _find(browser, "#api-key")
    assert browser.execute_script("return sessionStorage.getItem('uocr.apiKey')") is None
    _sign_in(browser, service, other)
    assert _find(browser, ".list-message .empty").text.startswith("No jobs yet")
    assert not browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")
    browser.get(f"{service.api_url}/console/#/jobs/{job_id}")
    assert "not found" in _find(browser, "#job-message .error").text
    assert not browser.find_elements(By.CSS_SELECTOR, ".page-cell")
    browser.get(f"{service.api_url}/console/#/search?q=signature")
    assert "No read page matches" in _find(browser, "#search-message .empty").text


def _upload_and_watch(browser: WebDriver, scan: Path, screenshots: Path) -> str:
    """Upload the 6-page scan, open its job, and see the grid fill group by group."""
    browser.find_element(By.ID, "nav-upload").click()
    _find(browser, "#file-input").send_keys(str(scan))  # what picking a file does
    _find(browser, "#chosen-files li")
    browser.find_element(By.ID, "priority").send_keys("interactive")
    _shot(browser, screenshots, "upload")
    browser.find_element(By.ID, "start-upload").click()
    link = _find(browser, ".upload-item.uploaded a.job-link", timeout=60)
    job_id = (link.get_attribute("href") or "").rsplit("/", 1)[-1]
    link.click()
    _find(browser, "#page-grid .page-cell")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".page-cell")) == 6

    seen = _watch_grid_fill(browser, 6, lambda: _shot(browser, screenshots, "job-running"))
    # Pages appear a whole page group at a time, never one page of a group before the rest.
    for done in seen:
        assert all(group <= done or not group & done for group in GROUPS_OF_SIX), seen
    assert any(0 < len(done) < 6 for done in seen), f"no partial grid was shown: {seen}"
    assert _find(browser, "#job-summary .badge.status-succeeded", timeout=60)
    return job_id


def _check_job_view(
    browser: WebDriver,
    service: Service,
    tenant: CreatedKey,
    job_id: str,
    screenshots: Path,
    downloads: Path,
) -> None:
    """The finished job: every page done, and the Markdown downloads as the API serves it."""
    assert "6 of 6 pages done" in browser.find_element(By.ID, "job-summary").text
    _find(browser, '#downloads button[data-format="markdown"]').click()
    saved = downloads / f"{job_id}-result.md"
    _wait(lambda: saved.exists() and saved.stat().st_size > 0, 30, "the Markdown download")
    with service.client(tenant) as client:
        expected = client.get(f"/v1/jobs/{job_id}/result", params={"format": "markdown"}).text
    assert saved.read_text() == expected and "archive" in expected.lower()
    _shot(browser, screenshots, "job")

    browser.find_element(By.ID, "nav-jobs").click()
    row = _find(browser, f'#jobs tr[data-job-id="{job_id}"]')
    assert row.get_attribute("data-status") == "succeeded"
    row.find_element(By.CSS_SELECTOR, "a.job-link").click()
    _find(browser, ".page-cell.status-succeeded")


def _check_page_view(
    browser: WebDriver, service: Service, tenant: CreatedKey, job_id: str, screenshots: Path
) -> None:
    """Page 3 by keyboard: its text, its boxes on the scan, hover, next and previous."""
    browser.find_element(By.CSS_SELECTOR, '.page-cell[data-page="1"]').send_keys(Keys.ARROW_RIGHT)
    browser.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
    assert browser.switch_to.active_element.get_attribute("data-page") == "3"
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    _wait(lambda: browser.current_url.endswith(f"#/jobs/{job_id}/pages/3"), 10, "page 3")

    with service.client(tenant) as client:
        page = client.get(f"/v1/jobs/{job_id}/pages/3").json()
    assert "page 3" in page["text"].lower()
    _wait(lambda: browser.find_element(By.ID, "page-markdown").get_attribute("textContent"))
    text = browser.find_element(By.ID, "page-text").get_attribute("textContent")
    assert text == page["text"]
    image = _find(browser, "#scan-image")
    _wait(lambda: browser.execute_script("return arguments[0].naturalWidth", image), 30, "scan")
    boxes = browser.find_elements(By.CSS_SELECTOR, "#overlay .box")
    assert len(boxes) == len(page["blocks"]) > 0
    frame = image.rect
    for box in boxes:
        rect = box.rect
        assert rect["width"] > 0 and rect["height"] > 0
        assert (
            frame["x"] - 1 <= rect["x"]
            and rect["x"] + rect["width"] <= frame["x"] + frame["width"] + 1
        )
        assert (
            frame["y"] - 1 <= rect["y"]
            and rect["y"] + rect["height"] <= frame["y"] + frame["height"] + 1
        )
    _check_box_lies_on_its_block(browser, image, boxes[0], page)

    ActionChains(browser).move_to_element(boxes[0]).perform()
    assert "active" in (boxes[0].get_attribute("class") or "")
    item = browser.find_element(By.CSS_SELECTOR, '.block[data-index="0"]')
    assert "active" in (item.get_attribute("class") or "")
    assert item.find_element(By.CSS_SELECTOR, ".block-text").text == page["blocks"][0]["text"]
    _shot(browser, screenshots, "page")

    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    _wait(lambda: browser.current_url.endswith("/pages/4"), 10, "page 4")
    _find(browser, "a#prev-page").click()
    _wait(lambda: browser.current_url.endswith("/pages/3"), 10, "page 3 again")


def _check_search(
    browser: WebDriver, service: Service, tenant: CreatedKey, job_id: str, screenshots: Path
) -> None:
    """A word only page 3 has ("signature"), searched in the console: one hit, page 3 of the
    scan, with its line; opened, the page shows the word's box on the scan where the API
    places it."""
    browser.find_element(By.ID, "nav-search").click()
    box = _find(browser, "#search-query")
    box.send_keys("signature", Keys.ENTER)
    hit = _find(browser, f'#search-hits .search-hit[data-job-id="{job_id}"]')
    assert len(browser.find_elements(By.CSS_SELECTOR, "#search-hits .search-hit")) == 1
    assert hit.get_attribute("data-page") == "3"
    assert "minutes-1962.pdf, page 3" in hit.text
    assert "signature" in hit.find_element(By.CSS_SELECTOR, ".snippet").text.lower()
    _shot(browser, screenshots, "search")

    hit.find_element(By.TAG_NAME, "a").click()
    _wait(lambda: "/pages/3?q=signature" in browser.current_url, 10, "page 3 with its hits")
    image = _find(browser, "#scan-image")
    _wait(lambda: browser.execute_script("return arguments[0].naturalWidth", image), 30, "scan")
    drawn = _find(browser, "#hit-overlay .hit")
    assert "1 match" in _find(browser, "#hit-summary").text
    with service.client(tenant) as client:
        params: dict[str, str | int] = {"q": "signature", "job_id": job_id, "page": 3}
        [found] = client.get("/v1/search", params=params).raise_for_status().json()["hits"]
    frame, rect = image.rect, drawn.rect
    scale = frame["width"] / found["width"]
    [(x1, y1, x2, y2)] = found["boxes"]
    assert abs(frame["x"] + x1 * scale - rect["x"]) <= 2
    assert abs(frame["y"] + y1 * scale - rect["y"]) <= 2
    assert abs((x2 - x1) * scale - rect["width"]) <= 2
    _shot(browser, screenshots, "search-hit")


def _check_box_lies_on_its_block(
    browser: WebDriver, image: WebElement, box: WebElement, page: dict[str, Any]
) -> None:
    """The box is drawn where the block is: its bbox scaled from page pixels to the image."""
    frame, rect = image.rect, box.rect
    scale = frame["width"] / page["width"]
    x1, y1, x2, y2 = page["blocks"][0]["bbox"]
    assert abs(frame["x"] + x1 * scale - rect["x"]) <= 2
    assert abs(frame["y"] + y1 * scale - rect["y"]) <= 2
    assert abs((x2 - x1) * scale - rect["width"]) <= 2


def _cancel_another_job(
    browser: WebDriver, service: Service, tenant: CreatedKey, screenshots: Path
) -> str:
    """A long job submitted by the API, canceled from the console."""
    with service.client(tenant) as client:
        # 15 pages (7 groups) at 100 dpi: long enough to cancel, under the test upload limit.
        document = scanned_pdf(sample_pages(15, lines=3), seed=9, dpi=100)
        long_job = submit(client, document).raise_for_status().json()["id"]
    browser.get(f"{service.api_url}/console/#/jobs/{long_job}")
    cancel = _find(browser, "#cancel-job")
    _wait(cancel.is_displayed, 30, "the cancel button (shown while the job is unfinished)")
    cancel.click()
    _find(browser, "#job-summary .badge.status-canceled", timeout=120)
    assert not browser.find_element(By.ID, "cancel-job").is_displayed()
    _shot(browser, screenshots, "job-canceled")
    with service.client(tenant) as client:
        assert client.get(f"/v1/jobs/{long_job}").json()["status"] == "canceled"
    return long_job


def _submit_damaged(service: Service, tenant: CreatedKey) -> str:
    """A truncated PDF: its pages 3 and 4 fail as damaged, 1 and 2 carry a warning."""
    whole = scanned_pdf(sample_pages(4, lines=3), seed=5)
    with service.client(tenant) as client:
        accepted = submit(client, whole[: int(len(whole) * 0.6)], "cut.pdf", priority="backlog")
        return str(accepted.raise_for_status().json()["id"])


def _check_failed_page(
    browser: WebDriver, service: Service, tenant: CreatedKey, job_id: str
) -> None:
    """Failed pages are marked in the grid and listed with their reasons; a failed page's own
    screen says why it failed."""
    with service.client(tenant) as client:
        job, _ = wait_for(client, job_id, timeout=180)
    reason = next(p["error"] for p in job["pages"] if p["page"] == 3)
    browser.get(f"{service.api_url}/console/#/jobs/{job_id}")
    _find(browser, '.page-cell.status-failed[data-page="3"]')
    assert "has-warnings" in (
        browser.find_element(By.CSS_SELECTOR, '.page-cell[data-page="1"]').get_attribute("class")
        or ""
    )
    issues = _find(browser, "#page-issues .issue-list").text
    assert "Page 3: " + reason in issues and "repaired file" in issues
    browser.find_element(By.CSS_SELECTOR, '.page-cell[data-page="3"]').click()
    assert reason in _find(browser, "#page-error").text
    browser.find_element(By.ID, "prev-page").click()
    assert "repaired file" in _find(browser, "#page-warnings").text


def _check_review_list(
    browser: WebDriver, service: Service, tenant: CreatedKey, damaged: str, screenshots: Path
) -> None:
    """The damaged document's pages are on the review list (failed: 3, 4; read with a
    warning: 1, 2), with why; one opens beside its scan, and marked reviewed it leaves the
    list, in the console and in the API."""
    browser.find_element(By.ID, "nav-review").click()
    row = _find(browser, f'#review tr[data-job-id="{damaged}"][data-page="3"]')
    listed = {
        int(r.get_attribute("data-page") or 0)
        for r in browser.find_elements(By.CSS_SELECTOR, f'#review tr[data-job-id="{damaged}"]')
    }
    assert listed == {1, 2, 3, 4}
    assert "damaged" in row.find_element(By.CSS_SELECTOR, ".review-reason").text
    _shot(browser, screenshots, "review")
    row.find_element(By.CSS_SELECTOR, ".mark-reviewed").click()
    _wait(
        lambda: (
            not browser.find_elements(
                By.CSS_SELECTOR, f'#review tr[data-job-id="{damaged}"][data-page="3"]'
            )
        ),
        10,
        "the reviewed page to leave the list",
    )
    with service.client(tenant) as client:
        left = client.get("/v1/review").raise_for_status().json()["pages"]
    assert sorted(p["page"] for p in left if p["job_id"] == damaged) == [1, 2, 4]
    browser.find_element(
        By.CSS_SELECTOR, f'#review tr[data-job-id="{damaged}"][data-page="4"] a'
    ).click()
    _find(browser, "#page-error")  # the page beside its scan, saying why it failed


def _check_jobs_list(browser: WebDriver, newest_first: list[str], screenshots: Path) -> None:
    """Newest first, and the status filter shows only jobs in that status."""
    browser.find_element(By.ID, "nav-jobs").click()
    _wait(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")) == 3, 10, "rows")
    rows = browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")
    assert [row.get_attribute("data-job-id") for row in rows] == newest_first
    _shot(browser, screenshots, "jobs")
    Select(browser.find_element(By.ID, "status-filter")).select_by_value("canceled")
    _wait(lambda: browser.current_url.endswith("#/jobs?status=canceled"), 10, "the filter")
    _wait(
        lambda: (
            [
                r.get_attribute("data-job-id")
                for r in browser.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")
            ]
            == [newest_first[0]]
        ),
        10,
        "only the canceled job",
    )


def test_several_files_uploaded_in_the_console_become_one_batch(
    service: Service, browser: Chrome, tmp_path: Path
) -> None:
    tenant = service.stack.new_tenant()
    scans = []
    for i in range(3):
        scan = tmp_path / f"letter-{i}.pdf"
        scan.write_bytes(scanned_pdf(sample_pages(1, lines=2, seed=90 + i), seed=i))
        scans.append(scan)
    _sign_in(browser, service, tenant)
    browser.find_element(By.ID, "nav-upload").click()
    _find(browser, "#file-input").send_keys("\n".join(str(scan) for scan in scans))
    _wait(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#chosen-files li")) == 3)
    browser.find_element(By.ID, "start-upload").click()
    _wait(
        lambda: len(browser.find_elements(By.CSS_SELECTOR, ".upload-item.uploaded")) == 3,
        timeout=60,
        what="three uploads",
    )
    with service.client(tenant) as client:
        batches = client.get("/v1/batches").json()["batches"]
        assert len(batches) == 1 and batches[0]["documents"]["total"] == 3
        wait_until(
            lambda: client.get(batches[0]["status_url"]).json()["status"] == "succeeded",
            120,
            what="the console's batch",
        )
        names = sorted(j["source"] for j in client.get(batches[0]["jobs_url"]).json()["jobs"])
    assert names == ["letter-0.pdf", "letter-1.pdf", "letter-2.pdf"]
    browser.find_element(By.ID, "nav-jobs").click()
    row = _find(
        browser, f'#batches tr[data-batch-id="{batches[0]["id"]}"][data-status="succeeded"]'
    )
    assert "3/3 settled" in row.text
