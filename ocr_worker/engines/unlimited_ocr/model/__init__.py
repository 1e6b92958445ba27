"""The model as it is stored and fed: checkpoint loading, the pinned manifest, page
preprocessing, and SAM's global attention with its bias folded in."""
