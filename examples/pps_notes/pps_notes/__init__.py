"""pps-notes: an example PPS layer plugin (see CONTRIBUTING.md, "Write a plugin")."""
