"""A page group's life, one module a stage, in the order ``pipeline.py`` calls them: claim (and
its lease), render, decode, record, advance, settle. ``rows`` holds the row queries they share."""
