"""``tomstats evaluate``: put story items to a model and write a per-question log.

Exit status: 0 every question answered; 1 some questions ended in an error record (re-run
the same command to retry them); 2 bad input (a file, field or value to fix, the log in use
by another run, an unwritable ``--out``); 3 an internal failure (a bug; from
:func:`tomstats.cli.main`).
"""

from __future__ import annotations

import argparse
import math
import sys

from tomstats._args import count_arg
from tomstats._cli_options import add_progress_argument, progress_wanted
from tomstats.evaluate.cache import DEFAULT_CACHE_DIR

__all__ = ["add_evaluate_arguments", "run_evaluate"]


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if math.isnan(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return v


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``tomstats evaluate`` to ``parser``."""
    parser.add_argument("--items", help="item file (JSON Lines)")
    parser.add_argument("--model", help="model file (models/*.toml)")
    parser.add_argument("--out",
                        help="evaluation log (JSON Lines); re-running the command resumes it")
    parser.add_argument("--samples", type=count_arg, default=1, metavar="K",
                        help="samples per item (default 1)")
    parser.add_argument("--allow-large", action="store_true",
                        help="run even when items x samples exceed the size guard (memory, "
                             "a day of runner time, or the disk beside --out)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="only the first N items")
    parser.add_argument("--concurrency", type=int, default=None, metavar="N",
                        help="requests in flight (default: the model file's concurrency)")
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR,
                       help=f"response cache folder (default {DEFAULT_CACHE_DIR})")
    cache.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    add_progress_argument(parser)
    parser.add_argument("--wait", nargs="?", type=_seconds, const=math.inf, default=0.0,
                        metavar="SECONDS",
                        help="when another run holds the log, wait for it (for at most "
                             "SECONDS, or as long as it takes) instead of refusing at once")
    parser.add_argument("--max-retry-after", type=_seconds, default=None, metavar="SECONDS",
                        help="longest Retry-After wait honoured (default: the model file's "
                             "max_retry_after, 30 s)")
    parser.add_argument("--repair", metavar="LOG", default=None,
                        help="remove duplicated records (a key answered twice, from runs of "
                             "older versions) from LOG, keeping the first answer, and exit")


def run_evaluate(args: argparse.Namespace) -> int:
    """Run ``tomstats evaluate``; 0 when every question was answered, 1 when some errored."""
    if args.repair is not None:
        from tomstats.evaluate.log import repair_log

        given = [f for f in ("items", "model", "out") if getattr(args, f) is not None]
        if given:
            raise ValueError(f"--repair LOG takes no --{given[0]}: it only mends a log")
        r = repair_log(args.repair, wait=args.wait)
        torn = f"; cut a torn last line ({r.torn_bytes} bytes)" if r.torn_bytes else ""
        print(f"{r.path}: removed {r.n_removed} duplicated record(s), kept {r.n_kept}{torn}")
        return 0
    missing = [f"--{f}" for f in ("items", "model", "out") if getattr(args, f) is None]
    if missing:
        raise ValueError(f"the following arguments are required: {', '.join(missing)} "
                         "(or --repair LOG)")
    from tomstats.evaluate.run import evaluate

    s = evaluate(args.items, args.model, args.out, samples=args.samples, limit=args.limit,
                 concurrency=args.concurrency, cache_dir=None if args.no_cache else args.cache_dir,
                 progress=progress_wanted(args), wait=args.wait,
                 max_retry_after=args.max_retry_after, allow_large=args.allow_large)
    print(f"{s.model}: {s.n_answered} answered ({s.n_cached} from cache, {s.n_requests} "
          f"requests), {s.n_errors} errors, {s.n_skipped} already in {s.out}; "
          f"{s.wall_s:.1f} s")
    if s.n_errors:
        print(f"tomstats evaluate: {s.n_errors} question(s) ended in an error after the retry "
              "budget; re-run the same command to try them again", file=sys.stderr)
        return 1
    return 0
