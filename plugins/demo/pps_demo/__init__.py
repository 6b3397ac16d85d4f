"""PPS plugin ``demo``: ``pps demo`` runs a demo entity on the embedded defaults."""
