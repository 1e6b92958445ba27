"""The migrations build exactly the schema the models describe, and `uocr db upgrade` is safe
to run twice (every deployment runs it at start)."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from uocr_core.migrate import upgrade
from uocr_core.models import Base


def test_the_migrated_schema_matches_the_models(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'schema.db'}"
    upgrade(url)
    upgrade(url)  # a second run is a no-op
    engine = create_engine(url)
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    engine.dispose()
    assert differences == []
