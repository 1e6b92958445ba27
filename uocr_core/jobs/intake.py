"""A document taken in for a job: its pages chosen, its files stored, its page and group rows
planned. The submit path runs it at once; a batch document runs it when it is admitted."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from uocr_core import object_keys
from uocr_core.errors import PayloadTooLarge, ServiceUnavailable
from uocr_core.jobs.documents import CONTENT_TYPES, InspectedFile, parse_page_selection
from uocr_core.models import Job, Page, PageGroup
from uocr_core.page_groups import PageGroupPlanner
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore


@dataclass(frozen=True)
class PageRef:
    page_no: int  # counted across the files of the job
    file_index: int
    index_in_file: int


def select_pages(
    inspected: list[InspectedFile], spec: str | None, settings: Settings
) -> list[PageRef]:
    all_pages = [
        (file_index, page_index)
        for file_index, f in enumerate(inspected)
        for page_index in range(f.page_count)
    ]
    selected = parse_page_selection(spec, len(all_pages))
    if len(selected) > settings.max_pages_per_request:
        raise PayloadTooLarge(
            f"the document has {len(selected)} pages to process; the limit is "
            f"{settings.max_pages_per_request} pages per request (max_pages_per_request)"
        )
    return [PageRef(page_no, *all_pages[page_no - 1]) for page_no in selected]


def store_inputs(store: ObjectStore, job_id: str, inspected: list[InspectedFile]) -> list[str]:
    """The job's own copies of its files (all or none: a failure removes what was written)."""
    stored: list[str] = []
    try:
        for index, f in enumerate(inspected):
            key = object_keys.input_key(job_id, index, f.kind)
            store.put(key, f.data, CONTENT_TYPES[f.kind])
            stored.append(key)
    except Exception:
        store.delete(stored)
        raise ServiceUnavailable("the object store refused the upload; nothing was kept") from None
    return stored


def add_pages_and_groups(
    session: Session, job: Job, pages: list[PageRef], stored: list[str], settings: Settings
) -> None:
    job.page_count = len(pages)
    for position, ref in enumerate(pages):
        session.add(
            Page(
                job_id=job.id,
                position=position,
                page_no=ref.page_no,
                source_key=stored[ref.file_index],
                source_index=ref.index_in_file,
            )
        )
    planner = PageGroupPlanner(size=settings.page_group_size, overlap=settings.page_group_overlap)
    for group in planner.plan(len(pages)):
        session.add(
            PageGroup(
                job_id=job.id,
                group_index=group.group_index,
                first_position=group.first_position,
                last_position=group.last_position,
                overlap=group.overlap,
            )
        )
