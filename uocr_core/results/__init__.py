"""A document's results that both sides make: the Markdown's page parts and chunks for retrieval
(the worker writes them at assembly; the API cuts chunks again at the size a caller asks for)."""
