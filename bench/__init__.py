"""The benches, grouped by what they measure (engine/, service/, accuracy/), and their harness."""
