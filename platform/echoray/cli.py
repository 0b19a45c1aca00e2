"""`echoray train | tune | study | report | bench-input`: exit 0 when the run completed, 2 for bad input,
1 for failures, 130 when interrupted by Ctrl-C and 143 by SIGTERM (a run, search or study
can then be resumed)."""

from __future__ import annotations

import argparse
import os
import sys
import time

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# Commands that print echoray's lines only (the libraries' in a log file) unless --verbose.
QUIET_COMMANDS = ("train", "tune", "study", "bench-input")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep one message style
        self.print_usage(sys.stderr)
        print(f"echoray: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="echoray", description="Data echoing and batch augmentation on Ray.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    t = sub.add_parser("train", help="train one pipeline (default: the embedded digits pipeline)")
    t.add_argument("pipeline", nargs="?", help="pipeline YAML (omit for the embedded default)")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override one config key (repeatable), e.g. --set echo.factor=2")
    t.add_argument("--out", help="run folder (default runs/<name>-<timestamp>)")
    t.add_argument("--resume", metavar="RUN_DIR",
                   help="continue an interrupted run from its latest checkpoint (same MLflow run); "
                        "--set may change only its placement and timeouts")
    t.add_argument("--verbose", action="store_true",
                   help="print Ray's and MLflow's own messages here too (default: RUN_DIR/console.log)")

    for name, what in (("tune", "repeated quasi-random search over the pipeline's search.space"),
                       ("study", "the same search for each variant (baseline, echo stages, BA), then the report")):
        s = sub.add_parser(name, help=what)
        s.add_argument("pipeline", nargs="?", help="pipeline YAML with a search section (omit with --resume)")
        s.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                       help="override one config key (repeatable)")
        s.add_argument("--trials", type=_positive, help="trials per repeat (default search.trials)")
        s.add_argument("--repeats", type=_positive, help="independent repeats (default search.repeats)")
        s.add_argument("--out", help="output folder" + (" (required)" if name == "study" else ""))
        s.add_argument("--resume", metavar="DIR", help="continue an interrupted run in DIR")
        _verbose(s)
        if name == "study":
            s.add_argument("--variants", action="append", metavar="V[,V...]",
                           help="baseline, before_augment:E, after_augment:E, batch:E, ba:M "
                                "(default baseline,before_augment:2,after_augment:2,batch:2)")
    b = sub.add_parser("bench-input", help="run only the input pipeline (read, decode, echo, augment, batching; "
                                            "no model): examples/s, time to first batch, stage busy time")
    b.add_argument("pipeline", nargs="?", help="pipeline YAML (omit for the embedded default)")
    b.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override one config key (repeatable)")
    b.add_argument("--seconds", type=_positive_float, help="stop after S seconds (default: one epoch)")
    _verbose(b)
    b.set_defaults(resume=None)
    r = sub.add_parser("report", help="draw a study's plots (Figure 3, BA accuracy) and log them to MLflow")
    r.add_argument("study_dir", help="folder written by `echoray study`")
    return p


def _verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verbose", action="store_true",
                   help="print Ray's and MLflow's own messages here too (default: a log file named at the start)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def _check_sets(argv: list[str]) -> None:
    """ConfigError for `--set key value` (a space where `=` belongs), naming both words,
    before the second one is read as the pipeline file."""
    from echoray.config_load import ConfigError

    for i, word in enumerate(argv[:-1]):
        if word == "--set" and "=" not in argv[i + 1]:
            after = f" followed by {argv[i + 2]!r}" if i + 2 < len(argv) else ""
            raise ConfigError(f"--set takes key=value; got {argv[i + 1]!r}{after}")


def _own_data_config(args: argparse.Namespace):
    """`echoray train`'s config; with `--set source.path` and no pipeline file, the digits
    defaults fitted to the data (own_data.py), said before the run starts."""
    from echoray.config_load import load_config
    from echoray.messages import say_own_data
    from echoray.own_data import left_out_note, own_data

    fitted = own_data(args.pipeline, args.overrides)
    cfg = load_config(args.pipeline, [*fitted.overrides, *args.overrides])
    if fitted.path is not None:
        args.label = f"embedded:digits defaults on {fitted.path}"
        say_own_data([*fitted.notes, left_out_note(cfg)])
    return cfg


def main(argv: list[str] | None = None) -> int:
    t0 = time.time()
    args = build_parser().parse_args(argv)
    from echoray.config_load import ConfigError
    from echoray.data.sources import SourceError

    try:
        cfg, resume = _validated(args, sys.argv[1:] if argv is None else argv)
    except (ConfigError, SourceError) as exc:
        print(f"echoray: {exc}", file=sys.stderr)
        return EXIT_USAGE
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    from echoray import console

    console.want_quiet(args.command in QUIET_COMMANDS and not args.verbose)
    err = console.stderr  # echoray's own lines reach the terminal while library output is diverted
    from echoray.driver.monitor import DataError, StallError
    from echoray.driver.signals import Terminated, sigterm_interrupts, terminated
    from echoray.tracking import TrackingError

    ray_was_up = _ray_is_up()  # a caller's Ray (tests, notebooks) is left running
    try:
        with sigterm_interrupts():
            return _dispatch(args, cfg, resume, t0)
    except (ConfigError, SourceError) as exc:
        print(f"echoray: {exc}", file=err())
        return EXIT_USAGE
    except (TrackingError, StallError) as exc:
        print(f"echoray: {exc}", file=err())
        return EXIT_FAILED
    except DataError as exc:
        print(f"echoray: bad input data: {exc}", file=err())
        return EXIT_FAILED
    except KeyboardInterrupt as exc:
        print(f"echoray: interrupted{': ' + str(exc) if str(exc) else ''}", file=err())
        return Terminated.exit_code if isinstance(exc, Terminated) or terminated() else EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        # A crash prints in full: with the libraries' output diverted (console.py) their own
        # report of it is in the log, so the traceback comes here (ECHORAY_DEBUG: always).
        if os.environ.get("ECHORAY_DEBUG") or console.log_path() is not None:
            import traceback

            traceback.print_exc(file=err())
        from echoray.recovery.failures import describe_failure

        print(f"echoray: run failed: {describe_failure(exc)}", file=err())
        if console.log_path() is not None and console.log_path().name == console.LOG_NAME:
            print(f"echoray: Ray's and MLflow's messages: {console.log_path()}", file=err())  # else restore() names it
        return EXIT_FAILED
    finally:
        # Ray is shut down only once no fit thread is blocked in it (driver/monitor.py
        # FIT_THREAD); entry() leaves without Ray's atexit when one still is.
        if not ray_was_up and not _fit_thread_running(wait_s=10):
            _shutdown_ray()
        console.restore()


def _validated(args: argparse.Namespace, argv: list[str]):
    """(config, resume) for the command, every input checked before anything starts
    (ConfigError or SourceError: exit 2)."""
    from echoray.config_load import ConfigError, load_config

    _check_sets(argv)
    if args.command in ("tune", "study"):
        if bool(args.pipeline) == bool(args.resume):
            raise ConfigError(f"echoray {args.command}: give a PIPELINE or --resume DIR (exactly one)")
        if args.resume and (args.overrides or args.trials or args.repeats or args.out):
            raise ConfigError("--resume continues a run as it was started: drop --set/--trials/--repeats/--out")
    if args.command == "train" and args.resume:
        if args.pipeline or args.out:
            raise ConfigError("--resume continues a run in its own folder with its own pipeline: drop PIPELINE/--out")
        from echoray.recovery.resume import open_run

        return open_run(args.resume, args.overrides)  # --set: only what a resume may change
    if args.command == "train":
        return _own_data_config(args), None
    if args.command != "report" and not args.resume:
        return load_config(args.pipeline, args.overrides), None
    return None, None


def _dispatch(args: argparse.Namespace, cfg, resume, t0: float) -> int:
    from pathlib import Path

    from echoray.messages import say_console_log, say_quiet_start

    pipeline = args.pipeline if args.command != "report" else None
    if args.command == "train":
        from echoray.messages import print_summary
        from echoray.run import train

        label = pipeline or getattr(args, "label", None) or "embedded:digits"
        summary = train(cfg, label, args.out, t0, resume=resume)
        print_summary(summary, verbose=args.verbose)
    elif args.command == "tune":
        from echoray.tune.search_run import run_search
        from echoray.tune.summary_text import print_search

        say_quiet_start()
        summary = run_search(cfg, pipeline, args.out, t0, trials=args.trials, repeats=args.repeats,
                             resume=args.resume)
        say_console_log(Path(summary["search_dir"]))
        print_search(summary)
    elif args.command == "bench-input":
        from echoray.bench_input import bench_input, print_bench

        say_quiet_start()
        print_bench(bench_input(cfg, args.seconds))
    elif args.command == "study":
        from echoray.tune.study import run_study

        say_quiet_start()
        report = run_study(cfg, pipeline, args.variants, args.out, t0, trials=args.trials, repeats=args.repeats,
                           resume=args.resume)
        say_console_log(Path(report["study_dir"]))
    else:
        from echoray.tune.report import write_report

        write_report(Path(args.study_dir))
    return EXIT_OK


def entry(argv: list[str] | None = None) -> None:
    """The console script and the job entrypoints: `main`, then exit with its status.
    With a thread still running, the process is left with os._exit after the output is
    flushed (driver/stop.exit_now): a fit thread blocked inside Ray (a stalled run: its
    controller, still waiting for resources, is not known to the driver and gets no
    abort) or Ray Data's stream threads of an interrupted run, which interpreter
    finalisation would end inside native code (SIGABRT). The MLflow run and the run
    folder were closed by then, and the job's actors die with this driver."""
    code = main(argv)
    from echoray.driver.stop import exit_now

    exit_now(code)  # os._exit while threads run: finalising would kill them (SIGABRT)


def _fit_thread_running(wait_s: float) -> bool:
    from echoray.driver.monitor import fit_thread_running

    return fit_thread_running(wait_s)


def _ray_is_up() -> bool:
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def _shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


if __name__ == "__main__":
    entry()
