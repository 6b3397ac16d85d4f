"""PPS plugin ``upkeep``: summarize old turns and ingest the graph with the configured LLM."""
