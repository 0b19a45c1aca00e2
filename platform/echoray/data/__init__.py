"""Ray Data side of the pipeline: sources, decode/augment ops, echo, the builder."""
