"""What POST /v1/uploads takes and answers (also the client's types)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from uocr_core.schemas.request_body import RequestBody


class UploadCreate(RequestBody):
    filename: str = Field(
        min_length=1,
        max_length=255,
        pattern=r"^[^\x00-\x1f\x7f]+$",  # no control characters
        examples=["box-17/scan-0042.pdf"],
    )
    content_type: str = Field(
        "application/pdf",
        pattern=r"^(application/pdf|image/(png|jpeg|tiff))$",
        description="sent again, identical, as the PUT's Content-Type header",
    )
    size: int | None = Field(
        None,
        ge=1,
        description="the document's bytes: a document over the upload limit is refused here, "
        "before it is sent, and the URL is signed for this length only (the store refuses any "
        "other)",
    )


class UploadTarget(BaseModel):
    object_key: str = Field(description="name it in POST /v1/jobs or /v1/batches")
    upload_url: str
    method: str = "PUT"
    headers: dict[str, str]
    expires_in_seconds: int
    max_bytes: int = Field(description="larger objects are refused when a job takes them")
