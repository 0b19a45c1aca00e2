"""Start or attach to Ray, with quiet Ray Data defaults for a terminal user."""

from __future__ import annotations

import logging
import os

import ray

from echoray.driver.signals import deferred_sigterm, reclaim_sigterm


def start_ray() -> bool:
    """Attach to RAY_ADDRESS (a cluster or a `ray job submit` job), else start a local Ray.

    Returns True when this process started a local instance. Token authentication
    is Ray's default and is left on.
    """
    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    with deferred_sigterm():
        if address:
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=True)
            started = False
        else:
            # The dashboard serves Ray's State API, which Ray Train's placement-group
            # cleaner polls; without it the cleaner cannot tell a dead controller.
            ray.init(include_dashboard=True, logging_level=logging.WARNING, log_to_driver=True)
            started = True
    reclaim_sigterm()
    quiet_data()
    return started


def quiet_data() -> None:
    from ray.data import DataContext

    ctx = DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.execution_options.verbose_progress = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    logging.getLogger("ray.train").setLevel(logging.WARNING)
