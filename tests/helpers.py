"""Helpers shared by the test tiers (importable because tests/conftest.py puts tests/ on sys.path)."""

from __future__ import annotations

import socket
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
