"""One typed settings object for every process.

Values come from environment variables prefixed ``UOCR_`` (sections use ``__``, e.g.
``UOCR_S3__ENDPOINT_URL``), then from an optional TOML file named by ``UOCR_CONFIG_FILE``.
Settings are validated once, when built, and frozen: each part receives only its own section.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from uocr_core.clamd import ClamdAddress

EngineName = Literal["rapidocr", "unlimited_ocr", "simulated"]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DatabaseSettings(_Section):
    url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/uocr"
    pool_size: int = Field(5, ge=1)


class RedisSettings(_Section):
    url: str = "redis://127.0.0.1:6379/0"


class S3Settings(_Section):
    """S3-compatible object store; ``local_root`` switches to a local folder (embedded mode)."""

    endpoint_url: str | None = None
    bucket: str = "uocr"
    region: str = "us-east-1"
    access_key_id: str = "uocr"
    secret_access_key: str = "uocr-secret"
    presign_seconds: int = Field(3600, ge=60)
    local_root: Path | None = None
    # Connections kept open to the store per process. botocore's default (10) is far below a
    # GPU worker's task threads (160 at 128 groups): on the H200 the overflow was opened and
    # thrown away request after request ("Connection pool is full" warnings by the dozen).
    max_pool_connections: int = Field(200, ge=1)


class WebhookSettings(_Section):
    timeout_seconds: float = Field(10.0, gt=0)
    max_attempts: int = Field(8, ge=1, le=30)
    backoff_base_seconds: float = Field(2.0, gt=0)
    # Kept below the broker's visibility timeout, so a delayed retry is never delivered twice.
    backoff_max_seconds: float = Field(600.0, gt=0)
    # Hosts exempt from the private-network refusal (e.g. an in-cluster receiver, or tests).
    allowed_private_hosts: tuple[str, ...] = ()


class UploadScanSettings(_Section):
    """Every uploaded document is scanned by ClamAV's daemon before anything is stored
    (uocr_core/jobs/upload_scan.py). Off unless clamd_address is set; once set, an upload is
    refused (503) while clamd cannot be reached: fail closed, never unscanned."""

    clamd_address: str | None = None  # unix:/run/clamav/clamd.ctl or tcp://clamav:3310
    # One scan's connect, and each of its sends and receives; a 200 MB scan takes seconds.
    timeout_seconds: float = Field(30.0, gt=0)

    @field_validator("clamd_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if not value:  # an empty variable (a template's placeholder) means off
            return None
        ClamdAddress.parse(value)  # raises, naming the forms it takes
        return value


class UnlimitedOcrSettings(_Section):
    """The GPU engine's decoding knobs (Unlimited-OCR v1 only: docs/model.md, "Which model")."""

    block_size: int = Field(32, ge=1)
    # 9 pages x 3000 + their 2,463 prefix tokens stay inside the model's 32,768 positions.
    max_tokens_per_page: int = Field(3000, ge=1)
    ngram_size: int = Field(35, ge=0)
    # v1 was trained with R-SWA (the whole prefix + the window): the default. SR-SWA reads at
    # most 12 x 32 rows plus BOS, prompt and window: faster on long groups, untrained for v1.
    sr_swa: bool = False
    sr_swa_max_blocks: int = Field(12, ge=1)  # 12 x 32 + the 128-token window = 512 rows
    sr_swa_page_gate: bool = True
    # A one-page document runs as the official single-image path does: a global view plus
    # tiles of tile_size pixels ("gundam"); off: base mode, as pages of a group.
    gundam: bool = True
    tile_size: int = Field(640, ge=16)
    dtype: Literal["auto", "bfloat16", "float32"] = "auto"
    cuda_graphs: bool = True  # replay the decode step as a CUDA graph (GPU only)
    fused_kernels: bool = True  # our Triton kernels for the decode step (GPU only)
    # SAM's relative positions folded into q·k (sam_attention.py), not a bias in memory
    fused_sam_rel_pos: bool = True
    # Pages of the groups waiting for the vision tower go through it together, up to this many
    # in one call (vision_batcher.py): a call is mostly launches, so bigger ones cost less a page.
    vision_batch_pages: int = Field(32, ge=1)
    # The groups waiting for the decode loop are prefilled together, up to this many rows a
    # pass (an 8-page group is ~2,200): 2.35 GB of activations at 16,384, 1.46 at 8,192, whose
    # passes of half the groups left 128 documents 7% slower (docs/capacity.md, "Memory").
    prefill_max_rows: int = Field(16384, ge=1)
    kept_pages_seconds: int = Field(600, ge=0)  # boundary-page KV waits this long for its group
    # A group whose boundary page's KV is reused here is fed that page's section as the previous
    # group wrote it, instead of decoding it again; off: the section is decoded (and skipped).
    reuse_boundary_section: bool = True
    # The GIL's switch interval in a GPU worker (CPython's default is 5 ms): the decode loop
    # waits for each step with the GIL released and takes it back from whichever task thread
    # runs Python, which by default keeps it up to 5 ms, longer than a step
    # (bench/service/gil_bench.py).
    gil_switch_interval_ms: float = Field(0.5, gt=0)
    # The model, vision tower and decode loop in a child process of the worker (engine_process
    # .py): there no task thread holds the GIL that each of the step's torch calls must take
    # back. On the H200 5-9% more pages/s than in the worker's process (bench/RESULTS.md).
    engine_process: bool = True


class SimulatedEngineSettings(_Section):
    """The simulated engine (capacity tests only; docs/scaling.md): the time a page group
    takes and the shape of what it returns. The defaults are the GPU engine's: an H100 at 128
    documents decodes ~11,850 tokens/s (bench/RESULTS.md, "GPU engine: decode throughput"),
    its vision tower takes ~20 ms a page, and a real page is ~700 tokens."""

    seconds_per_group: float = Field(0.0, ge=0)
    seconds_per_page: float = Field(0.02, ge=0)
    tokens_per_page: int = Field(700, ge=0)
    tokens_per_second: float = Field(11_850, gt=0)
    chars_per_token: float = Field(3.5, gt=0)
    blocks_per_page: int = Field(12, ge=1, le=1000)
    # Pages are drawn this small for it: what it "reads" does not matter, the render's cost
    # on the GPU host's cores is not the control plane's.
    render_long_side: int = Field(256, ge=16)


class SearchSettings(_Section):
    # Pages are indexed for GET /v1/search as they are recorded (Postgres only).
    index_pages: bool = True
    # Postgres' text-search configuration: stemming for its language ("english", "german",
    # ... : \dF in psql), "simple" for none. Pages are indexed with it, so a change applies to
    # pages recorded after it (docs/search.md).
    language: str = Field("english", pattern=r"^[a-z_]{1,63}$")
    # A query ranks at most this many of the tenant's matching pages (the first found): what
    # keeps a word on every page answering in milliseconds at 10^6 pages (docs/search.md).
    rank_candidates: int = Field(2000, ge=10, le=100_000)


class WorkerSettings(_Section):
    """Celery task limits. A page group's time limit grows with its page count."""

    group_time_limit_base_seconds: int = Field(60, ge=1)
    group_time_limit_per_page_seconds: int = Field(60, ge=1)
    lease_seconds: int = Field(120, ge=5)
    # The reconciler (beat) dispatches a pending group again when its message has not been in
    # the broker's queue for this long: lost with a Redis restart, or taken by a worker that
    # died before claiming it. Longer than a dispatch takes to commit; much shorter than the
    # broker's visibility timeout, which is what a lost message used to cost.
    redispatch_after_seconds: int = Field(60, ge=1)
    reconcile_interval_seconds: float = Field(30.0, ge=1)
    # Database and broker errors inside a task: retried with backoff (2, 4, 8 ... s up to the
    # cap), then left to the reconciler, which owns recovery from then on.
    transient_retry_max_seconds: int = Field(60, ge=1)
    transient_max_retries: int = Field(12, ge=0)
    max_group_attempts: int = Field(3, ge=1)
    render_dpi: int = Field(200, ge=50, le=600)
    max_render_side: int = Field(4000, ge=256)
    rapidocr_threads: int = Field(2, ge=1)
    # The CPU engine reads a page fed upside down or sideways the right way up (a page that
    # reads badly or runs down the page is read turned as well; ocr_worker/engines/orientation).
    # Off: every page is read as it lies (e.g. an archive of vertical Japanese text).
    auto_rotate_pages: bool = True
    # Processes that rasterise pages beside the task. PyMuPDF holds the GIL for a whole page,
    # so rendering in the task starves the lease-renewal thread (a heavy page: 9 s), and the
    # group is taken over while its worker is alive. 0 renders in the task (embedded, tests).
    render_processes: int = Field(1, ge=0)
    # Off for workers that only serve the control queue (webhooks, recovery): no model to load.
    preload_engine: bool = True
    # GPU workers run threads so up to max_concurrency page groups share each decode step; the
    # lease (not Celery's time limits, which threads ignore) then bounds a stuck group: it is
    # renewed for the group's time limit at most (lease.LeaseKeeper).
    pool: Literal["prefork", "threads"] = "prefork"
    # A GPU worker takes this many page groups beyond max_concurrency, so that they render and
    # store while max_concurrency others decode (Settings.gpu_worker_threads); unset: half of
    # max_concurrency, at most 32. On the H200 at 16 groups of short pages (64 tokens) each
    # group spent ~1.4 s rendering, in the tower and storing against ~1.9 s decoding: with 4
    # beyond, 11.4 of the 16 slots decoded a step, with 8 all 16 in steady running; at 128
    # groups 32 beyond kept all 128 slots decoding (bench/RESULTS.md).
    render_ahead_groups: int | None = Field(None, ge=0)
    # A prefork child (CPU engine) whose resident memory is above this after a task is replaced
    # by a fresh one, so a slow leak in a native library cannot creep for hours; 0 turns it off.
    # GPU workers (threads, one model per card) are not recycled.
    max_memory_per_child_mb: int = Field(3072, ge=0)
    # Whether a document's page groups may run at once on several workers; unset: yes, unless
    # the engine carries state from group to group (see Settings.page_groups_in_parallel).
    parallel_page_groups: bool | None = None
    # The model version this worker serves (its queues, its engine); unset: models.serve.
    # `uocr worker --model-version NAME` sets it for the worker processes it starts.
    model_version: str | None = None
    # The worker's own Prometheus metrics (pages, render saturation, tokens, GPU) on this port,
    # served by the worker's main process for all its children; unset: none served.
    metrics_port: int | None = Field(None, ge=1, le=65535)


class AdmissionSettings(_Section):
    """How waiting work (batch documents, backlog beyond a tenant's share) enters the broker:
    see uocr_core/admission.py. The broker then holds at most ``window`` jobs' groups."""

    window: int = Field(64, ge=1)  # jobs in flight (admitted, unfinished), all tenants together
    tenant_max_in_flight: int = Field(16, ge=1)  # one tenant's share of the window
    interval_seconds: float = Field(2.0, gt=0)  # beat's admission round (also run on submit)


class ModelVersionSettings(_Section):
    """One named model version: which engine, which weights, and the engine options that differ
    from the top-level ``unlimited_ocr`` section. Old versions stay listed so a rollback is a
    change of ``models.serve``, not a redeploy."""

    engine: EngineName = "rapidocr"
    model_path: Path | None = None
    manifest_sha256: str | None = None  # the manifest the weights must match (uocr model verify)
    unlimited_ocr: dict[str, object] = {}  # overrides of the top-level unlimited_ocr section

    @model_validator(mode="after")
    def _valid_options(self) -> ModelVersionSettings:
        UnlimitedOcrSettings.model_validate(self.unlimited_ocr)  # names and values checked now
        if self.engine == "unlimited_ocr" and self.model_path is None:
            raise ValueError("a version with engine 'unlimited_ocr' needs model_path")
        if self.manifest_sha256 is not None and self.model_path is None:
            raise ValueError("a version with manifest_sha256 needs model_path (the weights)")
        return self


# Version names become queue and worker names (ocr.interactive.<name>, cpu-<name>@host).
VERSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")


class ModelsSettings(_Section):
    """Named versions and the routing of new jobs between them. With no versions listed, the
    top-level ``engine``/``model_path``/``unlimited_ocr`` form the one version "default"."""

    versions: dict[str, ModelVersionSettings] = {}
    serve: str = "default"  # the stable version: new jobs go here unless routed to the canary
    canary: str | None = None
    canary_percent: float = Field(0.0, ge=0, le=100)  # share of new jobs sent to the canary
    canary_tenants: tuple[str, ...] = ()  # these tenants' new jobs always go to the canary

    @model_validator(mode="after")
    def _known_versions(self) -> ModelsSettings:
        bad = [name for name in self.versions if not VERSION_NAME.fullmatch(name)]
        if bad:
            raise ValueError(
                f"model version names {bad} must be letters, digits, '-' or '_' (at most 32)"
            )
        known = set(self.versions) or {"default"}
        for role, name in (("serve", self.serve), ("canary", self.canary)):
            if name is not None and name not in known:
                raise ValueError(f"models.{role} names {name!r}; versions are {sorted(known)}")
        if self.canary is None and (self.canary_percent or self.canary_tenants):
            raise ValueError("models.canary_percent and canary_tenants need models.canary")
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="UOCR_", env_nested_delimiter="__", frozen=True, extra="forbid"
    )

    # The deployment guide's parameters.
    model_path: Path | None = None
    service_port: int = Field(8100, ge=1, le=65535)
    max_concurrency: int = Field(16, ge=1, le=512)
    max_pages_per_request: int = Field(300, ge=1)
    request_timeout_seconds: int = Field(300, ge=1)
    visual_cache_workspace_gb: float = Field(4.0, gt=0)
    queue_max_size: int = Field(64, ge=1)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    page_group_size: int = Field(8, ge=1, le=64)
    page_group_overlap: int = Field(1, ge=0)
    engine: EngineName = "rapidocr"
    max_upload_bytes: int = Field(200 * 1024 * 1024, ge=1024)
    environment: Literal["development", "production"] = "development"
    # Where clients reach the API; status and result URLs in webhooks start with it.
    public_base_url: str = "http://localhost:8100"
    # Browser origins allowed to call the API (CORS), e.g. ["https://archive.example.org"];
    # none by default: a browser page on another origin cannot read the API's answers.
    cors_allow_origins: tuple[str, ...] = ()
    # Documents and results are deleted this long after their job ends (0: kept for ever);
    # the job's record stays, saying when and why.
    result_retention_days: float = Field(30, ge=0)
    # Objects under jobs/<id>/ that no job row owns (a submit refused after its upload, a
    # cleanup that failed) are deleted once they are this old.
    orphan_grace_hours: float = Field(24, gt=0)
    # inbox/ is the tenants' own staging area (a backlog may wait there for days before it is
    # submitted): kept unless this is set, then objects older than it are deleted.
    inbox_retention_hours: float | None = Field(None, gt=0)
    # A job's metadata is echoed in every status poll and webhook: bounded in size and depth.
    max_metadata_bytes: int = Field(16 * 1024, ge=2)
    max_metadata_depth: int = Field(8, ge=1)
    # Documents of at least this many pages go to the long queue (ocr.long), so a 300-page
    # document never holds a 3-page one behind it; workers take either pool or both.
    long_document_pages: int = Field(50, ge=1)
    # A job's status lists every page of a document this long or shorter; a longer one's status
    # is a summary unless the client asks for pages (all, or a range: this many at a time).
    status_pages_inline: int = Field(300, ge=1, le=10_000)
    # A page read with less confidence than this goes on the tenant's review list (as does one
    # read with a warning, or one that failed). RapidOCR scores clean print 0.95-1.0.
    review_confidence_below: float = Field(0.85, ge=0, le=1)
    # Tokenizers a caller may name to size chunks in tokens (GET .../result?format=chunks
    # &max_tokens=512&tokenizer=NAME): a name for each Hugging Face tokenizer.json file.
    chunk_tokenizers: dict[str, Path] = Field(default_factory=dict)

    database: DatabaseSettings = DatabaseSettings()
    redis: RedisSettings = RedisSettings()
    s3: S3Settings = S3Settings()
    webhooks: WebhookSettings = WebhookSettings()
    upload_scan: UploadScanSettings = UploadScanSettings()
    worker: WorkerSettings = WorkerSettings()
    unlimited_ocr: UnlimitedOcrSettings = UnlimitedOcrSettings()
    admission: AdmissionSettings = AdmissionSettings()
    models: ModelsSettings = ModelsSettings()
    simulated: SimulatedEngineSettings = SimulatedEngineSettings()
    search: SearchSettings = SearchSettings()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.page_group_overlap >= self.page_group_size:
            raise ValueError(
                f"page_group_overlap ({self.page_group_overlap}) must be smaller than "
                f"page_group_size ({self.page_group_size})"
            )
        if self.engine == "unlimited_ocr" and self.model_path is None:
            raise ValueError("model_path is required when engine is 'unlimited_ocr'")
        served = self.worker.model_version
        if served is not None and served not in (set(self.models.versions) or {"default"}):
            raise ValueError(
                f"worker.model_version names {served!r}; versions are "
                f"{sorted(self.models.versions) or ['default']}"
            )
        engines = {self.engine, *(v.engine for v in self.models.versions.values())}
        if self.environment == "production" and "simulated" in engines:
            raise ValueError("engine 'simulated' is for capacity tests; not in production")
        if self.environment == "production" and self.s3.secret_access_key == "uocr-secret":
            raise ValueError("s3.secret_access_key still has its development placeholder")
        return self

    def group_time_limit(self, group_pages: int) -> int:
        """Hard time limit of one page group: it grows with the group's pages, and is never
        below ``request_timeout_seconds``."""
        w = self.worker
        grown = w.group_time_limit_base_seconds + w.group_time_limit_per_page_seconds * group_pages
        return max(self.request_timeout_seconds, grown)

    @property
    def page_groups_in_parallel(self) -> bool:
        """A document's groups may run at once on several workers, unless the engine carries
        state from one group to the next (the GPU engine reuses the boundary pages' KV)."""
        if self.worker.parallel_page_groups is not None:
            return self.worker.parallel_page_groups
        return self.engine != "unlimited_ocr"

    @property
    def gpu_worker_threads(self) -> int:
        """A GPU worker's task threads: ``max_concurrency`` groups in the engine, and those
        rendering ahead or storing beside them (the engine queues any beyond its slots)."""
        ahead = self.worker.render_ahead_groups
        if ahead is None:
            ahead = min(max(1, self.max_concurrency // 2), 32)
        return self.max_concurrency + ahead

    @property
    def max_group_time_limit(self) -> int:
        """The largest group's limit; the broker's visibility timeout stays above it."""
        return self.group_time_limit(self.page_group_size)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get("UOCR_CONFIG_FILE")
        if config_file:
            check_config_file(Path(config_file))
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
        return tuple(sources)


class SettingsError(RuntimeError):
    """Start-up refused: a setting is invalid. The message names the setting."""


# UOCR_* variables that are not settings but are read directly elsewhere; every other UOCR_*
# variable must name a setting, so a misspelled one stops start-up instead of being ignored.
NON_SETTING_VARIABLES = frozenset(
    {
        "UOCR_CONFIG_FILE",  # this module: the TOML file of settings
        "UOCR_GPU_COUNT",  # ocr_worker/launcher.py: the cards on this host (tests, containers)
        "UOCR_REQUIRE_SERVICES",  # tests: a missing service fails the run instead of skipping
        "UOCR_TEST_DATABASE_URL",  # .ci/services env -> tests and benches: the servers
        "UOCR_TEST_REDIS_URL",
        "UOCR_TEST_S3_URL",
        "UOCR_CI_PG_PORT",  # .ci/services: the servers' ports
        "UOCR_CI_REDIS_PORT",
        "UOCR_CI_S3_PORT",
        "UOCR_URL",  # uocr_client: where the API is, and the client's key
        "UOCR_API_KEY",
        "UOCR_MODEL_DIR",  # docker-compose.yml: the host folder mounted at /models
    }
)


def setting_variables() -> frozenset[str]:
    """Every environment variable that names a setting: UOCR_<FIELD>, UOCR_<SECTION> (the
    whole section as JSON) and UOCR_<SECTION>__<FIELD>."""
    names = set()
    for name, field in Settings.model_fields.items():
        names.add(f"UOCR_{name.upper()}")
        section = field.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            names.update(f"UOCR_{name.upper()}__{sub.upper()}" for sub in section.model_fields)
    return frozenset(names)


def check_environment(environ: Mapping[str, str]) -> None:
    """Refuse UOCR_* variables that name no setting (pydantic-settings would ignore them)."""
    known = setting_variables()
    unknown = sorted(
        name
        for name in environ
        if name.upper().startswith("UOCR_") and name.upper() not in known | NON_SETTING_VARIABLES
    )
    if unknown:
        raise SettingsError("\n".join(_unknown_variable(name, known) for name in unknown))


def _unknown_variable(name: str, known: frozenset[str]) -> str:
    message = f"unknown setting {name} in the environment"
    close = _closest(name, known)
    return f"{message}; did you mean {close}?" if close else message


def _closest(variable: str, known: frozenset[str]) -> str | None:
    close = difflib.get_close_matches(variable.upper(), sorted(known), n=1, cutoff=0.75)
    return close[0] if close else None


def check_config_file(path: Path) -> None:
    """The file UOCR_CONFIG_FILE names must exist and be TOML; say which and why if not."""
    try:
        tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsError(f"config file {path} (UOCR_CONFIG_FILE) does not exist") from None
    except OSError as error:
        raise SettingsError(
            f"cannot read config file {path} (UOCR_CONFIG_FILE): {error.strerror}"
        ) from None
    except UnicodeDecodeError:
        raise SettingsError(f"config file {path} (UOCR_CONFIG_FILE) is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(
            f"config file {path} (UOCR_CONFIG_FILE) is not valid TOML: {error}"
        ) from None


def describe_validation_error(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        name = ".".join(str(part) for part in item["loc"]) or "settings"
        env = "UOCR_" + "__".join(str(part).upper() for part in item["loc"])
        if item["type"] == "extra_forbidden":  # from the config file, or a section's JSON
            close = _closest(env, setting_variables())
            hint = f"; did you mean {close[5:].lower().replace('__', '.')}?" if close else ""
            lines.append(f"unknown setting {name} ({env}){hint}")
        else:
            lines.append(f"invalid setting {name} ({env}): {item['msg']}")
    return "\n".join(lines)


def load_settings(**overrides: object) -> Settings:
    check_environment(os.environ)
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        raise SettingsError(describe_validation_error(error)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
