"""Webhooks: the events recorded, their signed delivery, the URL policy and dead letters."""
