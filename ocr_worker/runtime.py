"""What one worker process holds: its clients and its engine, built once after the fork."""

from __future__ import annotations

import gc
import os
import socket
import threading
from dataclasses import dataclass, field

import httpx
from celery import Celery
from sqlalchemy.orm import Session, sessionmaker

from ocr_worker.engines.base import OcrEngine
from ocr_worker.engines.engine_process import stop_worker
from ocr_worker.engines.factory import make_engine as make_ocr_engine
from ocr_worker.pipeline import PageGroupPipeline
from ocr_worker.worker_metrics import WorkerMetrics
from uocr_core.contracts import DEFAULT_MODEL_VERSION
from uocr_core.db import make_engine, make_session_factory
from uocr_core.dispatch import CeleryDispatcher, Dispatcher
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore, make_object_store


@dataclass
class WorkerRuntime:
    settings: Settings
    sessions: sessionmaker[Session]
    store: ObjectStore
    dispatcher: Dispatcher
    http: httpx.Client
    model_version: str = DEFAULT_MODEL_VERSION  # the version served; settings are its own
    metrics: WorkerMetrics | None = None  # when the worker serves /metrics
    engine: OcrEngine | None = None
    _pipeline: PageGroupPipeline | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)  # task threads share it

    @classmethod
    def build(
        cls, settings: Settings, app: Celery, model_version: str = DEFAULT_MODEL_VERSION
    ) -> WorkerRuntime:
        """``settings`` are the served version's (model_versions.settings_for)."""
        return cls(
            settings=settings,
            model_version=model_version,
            sessions=make_session_factory(make_engine(settings.database)),
            store=make_object_store(settings.s3),
            dispatcher=CeleryDispatcher(
                app, settings.group_time_limit, settings.long_document_pages
            ),
            # No kept connections: each webhook connects to the address its URL was vetted
            # to, and two tenants' hosts behind one address must not share a TLS connection.
            http=httpx.Client(limits=httpx.Limits(max_keepalive_connections=0)),
            metrics=WorkerMetrics(render_processes=settings.worker.render_processes)
            if settings.worker.metrics_port is not None
            else None,
        )

    @property
    def pipeline(self) -> PageGroupPipeline:
        """The engine loads on first use, so a control-only worker never loads a model."""
        with self._lock:
            return self._build_pipeline()

    def _build_pipeline(self) -> PageGroupPipeline:
        if self._pipeline is None:
            self.engine = self.engine or make_ocr_engine(self.settings, when_lost=stop_worker)
            if self.metrics is not None:
                self.engine.count_tokens = self.metrics.tokens_generated
            self._pipeline = PageGroupPipeline(
                sessions=self.sessions,
                store=self.store,
                engine=self.engine,
                dispatcher=self.dispatcher,
                settings=self.settings,
                worker_id=f"{socket.gethostname()}:{os.getpid()}",
                model_version=self.model_version,
                metrics=self.metrics,
            )
        return self._pipeline

    def close(self) -> None:
        """As the worker process exits: stop the render processes and let their queues go, so
        their semaphores are released (not reported as leaked on every worker shutdown)."""
        with self._lock:
            pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None and pipeline.render_pool is not None:
            pipeline.render_pool.pool.shutdown(wait=True, cancel_futures=True)
        del pipeline
        gc.collect()  # the queues' finalizers unlink their semaphores now, not at os._exit
        self.http.close()
