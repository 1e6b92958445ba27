"""What a finished document is written as: the assembled result (JSON, Markdown, text, JSON
lines), hOCR, and the searchable PDF with its text layer."""
