"""`echoray train | tune ...`: exit 0 when the run completed, 2 for bad input, 1 for failures."""

from __future__ import annotations

import argparse
import os
import sys
import time

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


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
    return p


def main(argv: list[str] | None = None) -> int:
    t0 = time.time()
    args = build_parser().parse_args(argv)
    from echoray.config_load import ConfigError, load_config
    from echoray.data.sources import SourceError

    try:
        cfg = load_config(args.pipeline, args.overrides)
    except ConfigError as exc:
        print(f"echoray: {exc}", file=sys.stderr)
        return EXIT_USAGE
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    from echoray.run import print_summary, train
    from echoray.runtime.monitor import StallError
    from echoray.tracking import TrackingError

    try:
        summary = train(cfg, args.pipeline or "embedded:digits", args.out, t0)
    except (ConfigError, SourceError) as exc:
        print(f"echoray: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (TrackingError, StallError) as exc:
        print(f"echoray: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("echoray: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        print(f"echoray: run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        _shutdown_ray()
    print_summary(summary)
    return EXIT_OK


def _shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
