"""What every request body model shares."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestBody(BaseModel):
    """A body a client sends: a field the API does not know is refused (a 422 naming it), not
    ignored, so a misspelt option (``webhook`` for ``webhook_url``) is never silently dropped;
    the OpenAPI schema says so (``additionalProperties: false``). Answers stay open to new
    fields, so an older client reads a newer server."""

    model_config = ConfigDict(extra="forbid")
