"""Load CIFAR "python version" batches without ever running code from the file.

A pickle can name any importable callable and call it on load. This unpickler
allows only the constructors plain data needs (numpy arrays and dtypes); any
other global, such as os.system, fails before it is resolved.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

from echoray.data.sources.base import SourceError

_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("_codecs", "encode"),
    ("builtins", "bytearray"),
}


class UnsafePickleError(pickle.UnpicklingError, SourceError):
    """Also a SourceError: the CLI reports it as bad input (exit 2) before anything starts."""


class PlainDataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise UnsafePickleError(f"refusing to load {module}.{name}: the file is not plain data")


def load_plain(data: bytes, origin: str) -> Any:
    try:
        return PlainDataUnpickler(io.BytesIO(data), encoding="bytes").load()
    except UnsafePickleError as exc:
        raise UnsafePickleError(f"{origin}: {exc}") from None
    except Exception as exc:  # truncated or foreign files
        raise UnsafePickleError(f"{origin}: not a readable CIFAR python batch ({exc})") from None
