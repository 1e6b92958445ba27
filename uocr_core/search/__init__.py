"""Full-text search over a tenant's read pages (Postgres), with where each hit lies on its scan."""
