"""echoray: data echoing and batch augmentation on Ray."""

__version__ = "0.1.0"
