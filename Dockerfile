# One image for every role; the gpu target adds torch + transformers for the GPU engine.
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY ocr_api ocr_api
COPY ocr_worker ocr_worker
COPY uocr_cli uocr_cli
COPY uocr_client uocr_client
COPY migrations migrations
RUN pip install -e .
RUN useradd --create-home uocr
USER uocr
EXPOSE 8100
CMD ["uocr", "api"]

FROM base AS gpu
USER root
# PyPI's Linux torch wheels carry CUDA.
RUN pip install -e '.[gpu]'
USER uocr
