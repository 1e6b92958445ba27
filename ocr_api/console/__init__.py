"""The web console (issue 14): static HTML, CSS and JS modules served by the API at /console."""
