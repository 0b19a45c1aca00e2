"""`echoray.train(...)` and `echoray.tune(...)` while `echoray.train` / `echoray.tune` are
also subpackages.

Python sets a subpackage as an attribute of its parent when it is imported (every run
imports echoray.train.loop), so a function named `echoray.train` would be replaced by the
package on first use. Instead the subpackage itself is made callable, by giving its module
object a ModuleType subclass with __call__ (assigning a module's __class__ is supported
since Python 3.5); a call goes to echoray.api. Nothing is imported until the call.
"""

from __future__ import annotations

import sys
import types


def make_callable(package: str, api_name: str) -> None:
    class CallablePackage(types.ModuleType):
        def __call__(self, *args, **kwargs):
            from echoray import api

            return getattr(api, api_name)(*args, **kwargs)

    CallablePackage.__call__.__doc__ = f"echoray.api.{api_name}: see there."
    sys.modules[package].__class__ = CallablePackage
