"""GET /v1/search."""
