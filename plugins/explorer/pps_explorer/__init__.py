"""PPS memory explorer: server-rendered pages (Jinja2 + htmx) at /ui/<entity>, mounted by the HTTP transport."""
