"""`echoray train | tune ...`: exit 0 when the run completed, 2 for bad input, 1 for failures,
130 when interrupted by Ctrl-C and 143 by SIGTERM (the run can then be resumed)."""

from __future__ import annotations

import argparse
import os
import sys
import time

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


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
                   help="continue an interrupted run from its latest checkpoint (same MLflow run)")
    return p


def main(argv: list[str] | None = None) -> int:
    t0 = time.time()
    args = build_parser().parse_args(argv)
    from echoray.config_load import ConfigError, load_config
    from echoray.data.sources import SourceError

    resume = None
    try:
        if args.resume:
            if args.pipeline or args.overrides or args.out:
                raise ConfigError("--resume continues a run as it was started: drop PIPELINE/--set/--out")
            from echoray.resume import open_run

            cfg, resume = open_run(args.resume)
        else:
            cfg = load_config(args.pipeline, args.overrides)
    except ConfigError as exc:
        print(f"echoray: {exc}", file=sys.stderr)
        return EXIT_USAGE
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    from echoray.run import print_summary, train
    from echoray.runtime.monitor import DataError, StallError
    from echoray.runtime.signals import Terminated, sigterm_interrupts
    from echoray.tracking import TrackingError

    ray_was_up = _ray_is_up()  # a caller's Ray (tests, notebooks) is left running
    try:
        with sigterm_interrupts():
            summary = train(cfg, args.pipeline or "embedded:digits", args.out, t0, resume=resume)
    except (ConfigError, SourceError) as exc:
        print(f"echoray: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (TrackingError, StallError) as exc:
        print(f"echoray: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except DataError as exc:
        print(f"echoray: bad input data: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt as exc:
        print("echoray: interrupted", file=sys.stderr)
        return exc.exit_code if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        print(f"echoray: run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if not ray_was_up:
            _shutdown_ray()
    print_summary(summary)
    return EXIT_OK


def _ray_is_up() -> bool:
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def _shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
