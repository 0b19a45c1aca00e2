"""Quasi-random search on Ray Tune: searcher, trials, MLflow runs, studies and reports."""
