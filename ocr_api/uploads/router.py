"""Large uploads: a presigned PUT into the tenant's inbox, so a 500 MB scan goes from the
client straight to object storage. The document checks run when a job or batch takes the
object, with the same refusals as an upload through the API."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from ocr_api.deps import StateDep, TenantDep, current_tenant
from ocr_api.web import negotiation
from ocr_api.web.openapi import COMMON_PROBLEMS, problems
from uocr_core import object_keys
from uocr_core.errors import PayloadTooLarge
from uocr_core.jobs.input_limits import check_name
from uocr_core.schemas.uploads import UploadCreate, UploadTarget

router = APIRouter(
    prefix="/v1/uploads",
    tags=["uploads"],
    dependencies=[
        Depends(current_tenant),
        Depends(negotiation.known_query_only),
        Depends(negotiation.accepts_json),
    ],
    responses=COMMON_PROBLEMS,
)


@router.post("", response_model=UploadTarget, status_code=201, responses=problems(413))
def create_upload(body: UploadCreate, state: StateDep, tenant: TenantDep) -> UploadTarget:
    """A URL to PUT one document to; the object is the tenant's, under its inbox."""
    limit = state.settings.max_upload_bytes
    if body.size is not None and body.size > limit:
        raise PayloadTooLarge(f"a {body.size}-byte document is over the {limit}-byte upload limit")
    key = object_keys.upload_key(tenant.id, check_name(body.filename))
    return UploadTarget(
        object_key=key,
        upload_url=state.store.presigned_upload_url(key, body.content_type, body.size),
        headers={"Content-Type": body.content_type},
        expires_in_seconds=state.settings.s3.presign_seconds,
        max_bytes=state.settings.max_upload_bytes,
    )
