"""The review list: pages worth a human look."""
