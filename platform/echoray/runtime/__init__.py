"""Thin adapters around Ray itself: session start, resource plan, progress collector."""
