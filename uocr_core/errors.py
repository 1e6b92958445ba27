"""Domain errors. Services raise these; the HTTP layer maps them to statuses in one place.

Each kind has a stable ``slug`` (the problem type a client can switch on) and a ``title``; the
message is the ``detail`` of that one occurrence.
"""

from __future__ import annotations


class DomainError(Exception):
    status_code = 400
    slug = "bad-request"
    title = "Bad request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(DomainError):
    status_code = 422
    slug = "invalid-request"
    title = "The request is invalid"

    def __init__(self, message: str, *, loc: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.loc = loc  # the field at fault, as a validation error names it: ("query", "limit")


class InvalidDocument(DomainError):
    status_code = 422
    slug = "invalid-document"
    title = "The document cannot be read"


class InfectedDocument(DomainError):
    """The upload scan (ClamAV) found malware: refused, and nothing of it kept."""

    status_code = 422
    slug = "infected-document"
    title = "The document carries malware"

    def __init__(self, message: str, *, signature: str) -> None:
        super().__init__(message)
        self.signature = signature


class UnsupportedMediaType(DomainError):
    status_code = 415
    slug = "unsupported-media-type"
    title = "Unsupported media type"


class PayloadTooLarge(DomainError):
    status_code = 413
    slug = "payload-too-large"
    title = "The request is too large"


class NotFound(DomainError):
    status_code = 404
    slug = "not-found"
    title = "Not found"


class Gone(DomainError):
    status_code = 410
    slug = "gone"
    title = "Deleted"


class NotFinished(DomainError):
    status_code = 409
    slug = "not-finished"
    title = "Not finished yet"


class Conflict(DomainError):
    """The request contradicts the resource's state: cancel a finished job, reuse an
    Idempotency-Key with another document."""

    status_code = 409
    slug = "conflict"
    title = "Conflicts with the current state"


class QueueFull(DomainError):
    status_code = 429
    slug = "queue-full"
    title = "The queue is full"

    def __init__(self, message: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


# What a client is told to wait while a dependency (database, broker, object store) is down.
DEPENDENCY_RETRY_AFTER_SECONDS = 5


class ServiceUnavailable(DomainError):
    status_code = 503
    slug = "service-unavailable"
    title = "Temporarily unavailable"

    def __init__(
        self, message: str, retry_after_seconds: int = DEPENDENCY_RETRY_AFTER_SECONDS
    ) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class Unauthorized(DomainError):
    status_code = 401
    slug = "unauthorized"
    title = "Missing or invalid API key"


class KeyExpired(Unauthorized):
    """A key past its expiry (a rotated key after its overlap): told apart from an invalid one,
    so its holder knows to switch to the successor rather than suspect a typo."""

    slug = "key-expired"
    title = "API key expired"


class ScannerUnavailable(ServiceUnavailable):
    """The upload scan is configured but clamd gave no verdict: uploads are refused until it
    answers again (fail closed), never taken unscanned."""

    slug = "scanner-unavailable"
    title = "The upload scanner is unavailable"
