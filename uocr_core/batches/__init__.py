"""Batches: many documents submitted as one, their progress and their completion."""
