"""The model's output read back: the page guard (where a page ends), sections, det blocks."""
