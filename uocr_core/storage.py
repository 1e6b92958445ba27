"""Object storage behind one small interface: S3-compatible in the service, a folder embedded."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as S3ConnectionError

from uocr_core.settings import S3Settings


class ObjectNotFound(KeyError):
    pass


class StorageUnavailable(RuntimeError):
    """The object store did not answer, or answered with a server error, after botocore's own
    retries: a dependency down for now (tasks retry, the API answers 503), not a bad document
    or request. Its cause is botocore's error."""


F = TypeVar("F", bound=Callable[..., Any])


def _unavailable_is_transient(method: F) -> F:
    @functools.wraps(method)
    def call(self: S3ObjectStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except (S3ConnectionError, HTTPClientError) as error:  # refused, reset, timed out
            raise StorageUnavailable(f"the object store did not answer: {error}") from error
        except ClientError as error:
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if status >= 500:  # 500, 503 SlowDown, a gateway's 502/504
                raise StorageUnavailable(f"the object store failed: {error}") from error
            raise

    return call  # type: ignore[return-value]


@dataclass(frozen=True)
class StoredObject:
    key: str
    modified: datetime


class ObjectStore(Protocol):
    def put(self, key: str, data: bytes, content_type: str = ...) -> None: ...
    def get(self, key: str) -> bytes: ...
    def put_file(self, key: str, path: Path, content_type: str = ...) -> None: ...
    def get_file(self, key: str, path: Path) -> None: ...
    def copy(self, source: str, target: str) -> None: ...
    def delete(self, keys: list[str]) -> None: ...
    def keys_under(self, prefix: str) -> list[str]: ...
    def objects_under(self, prefix: str) -> Iterator[StoredObject]: ...
    def exists(self, key: str) -> bool: ...
    def size(self, key: str) -> int: ...
    def presigned_url(self, key: str) -> str: ...
    def presigned_upload_url(self, key: str, content_type: str, size: int | None = None) -> str: ...
    def ping(self) -> None: ...


class S3ObjectStore:
    def __init__(self, settings: S3Settings) -> None:
        self.bucket = settings.bucket
        self.presign_seconds = settings.presign_seconds
        self.client = boto3.client(
            "s3",
            endpoint_url=settings.endpoint_url,
            region_name=settings.region,
            aws_access_key_id=settings.access_key_id,
            aws_secret_access_key=settings.secret_access_key,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                max_pool_connections=settings.max_pool_connections,
            ),
        )

    @_unavailable_is_transient
    def ensure_bucket(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError:
            self.client.create_bucket(Bucket=self.bucket)

    @_unavailable_is_transient
    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type)

    @_unavailable_is_transient
    def get(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as error:
            if error.response["Error"]["Code"] in ("NoSuchKey", "404"):
                raise ObjectNotFound(key) from None
            raise

    @_unavailable_is_transient
    def put_file(
        self, key: str, path: Path, content_type: str = "application/octet-stream"
    ) -> None:
        """From a file, in parts for a large one: never all in memory (a 3,000-page result)."""
        self.client.upload_file(
            str(path), self.bucket, key, ExtraArgs={"ContentType": content_type}
        )

    @_unavailable_is_transient
    def get_file(self, key: str, path: Path) -> None:
        """Into a file, in parts: a 3,000-page scan is read from disk, never held in memory."""
        try:
            self.client.download_file(self.bucket, key, str(path))
        except ClientError as error:
            if error.response["Error"]["Code"] in ("NoSuchKey", "404"):
                raise ObjectNotFound(key) from None
            raise

    @_unavailable_is_transient
    def copy(self, source: str, target: str) -> None:
        """Server-side: the bytes never pass through this process."""
        self.client.copy_object(
            Bucket=self.bucket, Key=target, CopySource={"Bucket": self.bucket, "Key": source}
        )

    @_unavailable_is_transient
    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": key} for key in keys[start : start + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk})

    @_unavailable_is_transient
    def keys_under(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def objects_under(self, prefix: str) -> Iterator[StoredObject]:
        """Page by page (a sweep of millions of objects is never one list)."""
        pages = iter(
            self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        )
        while (page := self._next_page(pages)) is not None:
            for item in page.get("Contents", []):
                yield StoredObject(item["Key"], item["LastModified"])

    @_unavailable_is_transient
    def _next_page(self, pages: Iterator[dict[str, Any]]) -> dict[str, Any] | None:
        return next(pages, None)

    def exists(self, key: str) -> bool:
        try:
            self.size(key)
        except ObjectNotFound:
            return False
        return True

    @_unavailable_is_transient
    def size(self, key: str) -> int:
        try:
            return int(self.client.head_object(Bucket=self.bucket, Key=key)["ContentLength"])
        except ClientError as error:
            if error.response["Error"]["Code"] in ("NoSuchKey", "404", "NotFound"):
                raise ObjectNotFound(key) from None
            raise

    def presigned_url(self, key: str) -> str:
        return str(
            self.client.generate_presigned_url(
                "get_object",
                Params={"Bucket": self.bucket, "Key": key},
                ExpiresIn=self.presign_seconds,
            )
        )

    def presigned_upload_url(self, key: str, content_type: str, size: int | None = None) -> str:
        """A PUT straight into the bucket: big scans never pass through the API process. The
        client must send the same Content-Type, and with ``size`` exactly that many bytes
        (both are signed: the store refuses anything else)."""
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "ContentType": content_type}
        if size is not None:
            params["ContentLength"] = size
        return str(
            self.client.generate_presigned_url(
                "put_object", Params=params, ExpiresIn=self.presign_seconds
            )
        )

    @_unavailable_is_transient
    def ping(self) -> None:
        self.client.head_bucket(Bucket=self.bucket)


class LocalObjectStore:
    """A folder standing in for the bucket (embedded mode, single machine)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in path.parents:
            raise ValueError(f"object key escapes the store: {key!r}")
        return path

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)  # atomic: a reader never sees half an object

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise ObjectNotFound(key) from None

    def put_file(
        self, key: str, path: Path, content_type: str = "application/octet-stream"
    ) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(target.suffix + ".tmp")
        shutil.copyfile(path, tmp)
        tmp.replace(target)

    def get_file(self, key: str, path: Path) -> None:
        try:
            shutil.copyfile(self._path(key), path)
        except FileNotFoundError:
            raise ObjectNotFound(key) from None

    def copy(self, source: str, target: str) -> None:
        self.put(target, self.get(source))

    def delete(self, keys: list[str]) -> None:
        for key in keys:
            self._path(key).unlink(missing_ok=True)

    def keys_under(self, prefix: str) -> list[str]:
        keys = (p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())
        return sorted(k for k in keys if k.startswith(prefix) and not k.endswith(".tmp"))

    def objects_under(self, prefix: str) -> Iterator[StoredObject]:
        for key in self.keys_under(prefix):
            modified = self._path(key).stat().st_mtime
            yield StoredObject(key, datetime.fromtimestamp(modified, UTC))

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def size(self, key: str) -> int:
        try:
            return self._path(key).stat().st_size
        except FileNotFoundError:
            raise ObjectNotFound(key) from None

    def presigned_url(self, key: str) -> str:
        return self._path(key).as_uri()

    def presigned_upload_url(self, key: str, content_type: str, size: int | None = None) -> str:
        return self._path(key).as_uri()  # a client on this machine writes the file there

    def ping(self) -> None:
        if not self.root.is_dir():
            raise OSError(f"object store folder missing: {self.root}")


def make_object_store(settings: S3Settings) -> ObjectStore:
    if settings.local_root is not None:
        return LocalObjectStore(settings.local_root)
    return S3ObjectStore(settings)
