"""Ray Train side: models, optimisation, the per-worker loop, the trainer adapter."""
