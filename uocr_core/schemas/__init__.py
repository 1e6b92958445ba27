"""The public models of the HTTP API (what a submit takes and a status poll returns), shared
by the API and by the client (``uocr_client``), which imports nothing else of the server."""
