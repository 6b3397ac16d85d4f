"""PPS rich texture layer: a Graphiti temporal knowledge graph. Heavy imports live in the submodules."""
