"""pps-llm: the entity's chat model, any OpenAI-compatible endpoint (``[llm]``)."""
