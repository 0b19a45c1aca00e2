"""Driver-side watch over a running fit: progress lines, MLflow metrics, stall detection."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import ray

from echoray.driver import stop
from echoray.runtime.resources import ResourcePlan, format_shortfall, shortfall

# The thread that runs a fit on the driver. One the driver gave up on (stall, bad data,
# interrupt) can still be blocked inside Ray; shutting Ray down under it crashed the
# process at exit (SIGSEGV after the right stall message, twice in CI), so the CLI waits
# for it (an aborted controller lets it return) and otherwise leaves without Ray's atexit.
FIT_THREAD = "echoray-fit"

# Each fit thread's end, as an Event its target sets last. Not Thread.join/is_alive: in
# CPython 3.11 a join interrupted by a signal handler's exception (SIGTERM -> Terminated,
# Ctrl-C) marks the still-running thread stopped (threading._wait_for_tstate_lock, the
# bpo-45274 branch: `lock.locked()` holds because the thread still holds its lock), so
# is_alive() said False, the CLI shut Ray down and the interpreter finalised under a
# training thread mid-step: SIGABRT from torch's backward or numpy, or exit 1.
_fit_ends: list[threading.Event] = []
# The ends of fits the driver gave up on with nothing able to stop them (abandon_fits):
# still counted as running, so Ray is not shut down under them, but never waited for.
_abandoned: set[threading.Event] = set()


class StallError(RuntimeError):
    pass


class DataError(RuntimeError):
    """Bad input data found while training (a retry would meet it again); names the files."""


class FatalTrainingError(RuntimeError):
    """An error in training that a retry would meet again (a diverged loss)."""


class CollectorLost(RuntimeError):
    """The run's collector actor died (its process or node lost). It held the run's live
    state (which epochs are final, the audit since the last checkpoint), so the run
    cannot go on; the checkpoints can: `echoray train --resume` continues from them."""


def poll_collector(collector, *args) -> dict[str, Any]:
    """collector.poll(*args); CollectorLost when the actor is gone (Ray's actor-death errors,
    public in ray.exceptions)."""
    try:
        return ray.get(collector.poll.remote(*args))
    except (ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError) as exc:
        raise CollectorLost(f"the run's collector actor was lost ({type(exc).__name__})") from exc


def stall_message(plan: ResourcePlan, waited_s: float) -> str:
    total = ray.cluster_resources()
    avail = ray.available_resources()
    missing = shortfall(plan.least().demand(), total)
    lines = [f"no training progress for {waited_s:.0f} s (train.stall_timeout_s)."]
    if missing:
        lines.append("The cluster lacks resources the plan needs: " + format_shortfall(missing) + ".")
    lines.append(f"Plan: {plan.describe()}.")
    shown = {k: round(v, 2) for k, v in total.items() if not k.startswith(("node:", "memory", "object_store"))}
    free = {k: round(avail.get(k, 0.0), 2) for k in shown}
    lines.append(f"Cluster total {shown}; available now {free}.")
    lines.append("Lower scaling.num_workers / preprocess.actors, or add nodes with those resources.")
    return " ".join(lines)


def stop_training(collector, reason: str) -> bool:
    """The driver stops waiting (error, interrupt): abort Ray Train's controller, which
    stops its workers and data pipeline, so nothing trains on behind it (a driver that
    exits takes them along anyway; one that lives on, as in tests or Tune, would not).
    True when a controller was found and told to abort; False when none has registered
    (a fit in this process has none; a Ray Train fit's registers when its worker group
    starts, so a run stalled waiting for the group's resources has none to abort)."""
    collector.abort.remote(reason)  # and a worker group started meanwhile returns at once
    try:
        controller = ray.get(collector.get_controller.remote(), timeout=10)
        if controller is None:
            return False
        # Not killed: a controller killed while it aborts leaves its placement group behind
        # (2 CPUs held for good on a shared Ray; the next runs stalled, seen in the test
        # suite). A stalled run's controller is not known here (it registers when its
        # worker group starts): the driver abandons that fit (abandon_fits, run.py).
        # `abort` is the controller's own method, what Ray Train's driver calls on Ctrl-C
        # (ray-project/ray#53600); no public API stops a fit from another thread.
        controller.abort.remote()
        return True
    except Exception:  # noqa: BLE001 - best effort while failing
        return False


def abandon_fits() -> None:
    """Give up on the fits still running: nothing the driver can send stops them. They
    still count as running (fit_thread_running: Ray is not shut down under them, and the
    CLI leaves with os._exit), but no wait is spent on them."""
    _abandoned.update(end for end in _fit_ends if not end.is_set())


def join_fit(timeout_s: float) -> bool:
    """Wait up to `timeout_s` for the fit thread (FIT_THREAD) to end; True when none is left
    running (driver/stop.py says why the driver must wait)."""
    return not fit_thread_running(timeout_s)


def fit_thread_running(wait_s: float = 0.0) -> bool:
    """Whether a fit thread is still running after waiting up to `wait_s` for it to end
    (waits on its end event, which a signal cannot corrupt; see _fit_ends). An abandoned
    fit (abandon_fits) counts as running and is not waited for."""
    deadline = time.monotonic() + wait_s
    for end in list(_fit_ends):
        if end not in _abandoned:
            end.wait(max(0.0, deadline - time.monotonic()))
    _fit_ends[:] = [end for end in _fit_ends if not end.is_set()]
    _abandoned.difference_update({end for end in _abandoned if end.is_set()})
    return bool(_fit_ends)


def watch_fit(
    fit: Callable[[], Any],
    collector,
    plan: ResourcePlan,
    stall_timeout_s: float,
    on_event: Callable[[dict], None],
    on_factor: Callable[[dict], None] | None = None,
    poll_s: float = 0.5,
    on_restart: Callable[[dict], None] | None = None,
    final_since: int = 0,
    on_progress: Callable[[dict], None] | None = None,
    on_tick: Callable[[dict | None, float], None] | None = None,
) -> dict[str, Any]:
    """Run `fit` in a thread; forward epoch events; raise StallError on no progress and
    DataError on bad data (at once: a worker-group retry would fail the same way).

    `on_progress` gets every epoch event as it comes (a replayed epoch again); `on_event`
    gets each epoch once, in order, when it is final: covered by a checkpoint (a failed
    worker group replays the epochs after it) or when the fit has ended.
    `on_tick` gets the workers' summed counters and the echo factor at every poll
    (runtime/progress.py LiveProgress turns them into progress lines inside an epoch).
    `final_since`: epochs already final before this fit (a resumed run).
    Returns the collector's last poll (with `final`, the rank-0 summary record).
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()
    _fit_ends.append(done)

    def target() -> None:
        try:
            outcome["result"] = fit()
        except BaseException as exc:  # re-raised on the main thread
            outcome["error"] = exc
        finally:
            done.set()

    stop.clear()
    thread = threading.Thread(target=target, name=FIT_THREAD, daemon=True)
    started = time.time()
    thread.start()
    try:
        state = _watch(done, collector, plan, stall_timeout_s, started, poll_s, final_since,
                       on_event, on_factor, on_restart, on_progress, on_tick)
    except BaseException:  # an interrupt, a stall, bad data: the fit stops at its next step
        stop.request()
        raise
    if "error" in outcome:
        raise outcome["error"]
    state["started_at"] = started
    return state


def _watch(done: threading.Event, collector, plan, stall_timeout_s, started, poll_s, final_since,
           on_event, on_factor, on_restart, on_progress, on_tick) -> dict[str, Any]:
    """watch_fit's polling loop, until the fit thread has ended; its last poll."""
    seen = seen_factors = seen_restarts = 0
    state: dict[str, Any] = {}
    while True:
        done.wait(poll_s)
        # Whether the fit had ended is read before the poll, so the last poll comes after
        # its end and holds its final record: a fit that returns right after the workers'
        # finish (a local-mode run) ended between a poll and
        # the check after it in 2 of 20 digits trials ("no final report from rank 0").
        ended = done.is_set()
        state = poll_collector(collector, seen, seen_factors, final_since, ended)
        if on_tick:
            on_tick(state["tick"], state["echo_factor"])
        for ev in state["events"]:
            if on_progress:
                on_progress(ev)
        for ev in state["final_events"]:
            on_event(ev)
        for point in state["factor_history"]:
            if on_factor:
                on_factor(point)
        for rec in state["recoveries"][seen_restarts:]:
            if on_restart:
                on_restart(rec)
        seen += len(state["events"])
        seen_factors += len(state["factor_history"])
        seen_restarts = len(state["recoveries"])
        final_since += len(state["final_events"])
        if state["fatal"]:
            fatal = state["fatal"]
            raise (DataError if fatal["kind"] == "data" else FatalTrainingError)(fatal["message"])
        if ended:
            break
        quiet = time.time() - max(state["last_progress"], started)
        if state["final"] is None and quiet > stall_timeout_s:
            raise StallError(stall_message(plan, quiet))
    return state
