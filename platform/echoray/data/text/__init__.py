"""The text source: documents -> read units -> tokens -> packed sequences (see source.py)."""
