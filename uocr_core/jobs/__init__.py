"""Jobs as the domain sees them: intake and its input checks, the service that creates, cancels
and deletes them, admission of a backlog, listing, reuse of earlier results, page images."""
