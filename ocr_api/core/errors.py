"""Domain errors. Services raise these; the HTTP layer maps them to statuses in one place."""

from __future__ import annotations


class DomainError(Exception):
    status_code = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(DomainError):
    status_code = 422


class InvalidDocument(DomainError):
    status_code = 422


class UnsupportedMediaType(DomainError):
    status_code = 415


class PayloadTooLarge(DomainError):
    status_code = 413


class NotFound(DomainError):
    status_code = 404


class Gone(DomainError):
    status_code = 410


class NotFinished(DomainError):
    status_code = 409


class Conflict(DomainError):
    """The request contradicts the resource's state: cancel a finished job, reuse an
    Idempotency-Key with another document."""

    status_code = 409


class QueueFull(DomainError):
    status_code = 429

    def __init__(self, message: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


# What a client is told to wait while a dependency (database, broker, object store) is down.
DEPENDENCY_RETRY_AFTER_SECONDS = 5


class ServiceUnavailable(DomainError):
    status_code = 503

    def __init__(
        self, message: str, retry_after_seconds: int = DEPENDENCY_RETRY_AFTER_SECONDS
    ) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class Unauthorized(DomainError):
    status_code = 401
