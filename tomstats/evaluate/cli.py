"""``tomstats evaluate``: put story items to a model and write a per-question log."""

from __future__ import annotations

import argparse
import sys

from tomstats.evaluate.cache import DEFAULT_CACHE_DIR

__all__ = ["add_evaluate_arguments", "run_evaluate"]


def add_evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``tomstats evaluate`` to ``parser``."""
    parser.add_argument("--items", required=True, help="item file (JSON Lines)")
    parser.add_argument("--model", required=True, help="model file (models/*.toml)")
    parser.add_argument("--out", required=True,
                        help="evaluation log (JSON Lines); re-running the command resumes it")
    parser.add_argument("--samples", type=int, default=1, metavar="K",
                        help="samples per item (default 1)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="only the first N items")
    parser.add_argument("--concurrency", type=int, default=None, metavar="N",
                        help="requests in flight (default: the model file's concurrency)")
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--cache-dir", default=DEFAULT_CACHE_DIR,
                       help=f"response cache folder (default {DEFAULT_CACHE_DIR})")
    cache.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run_evaluate(args: argparse.Namespace) -> int:
    """Run ``tomstats evaluate``; 0 when every question was answered, 1 when some errored."""
    from tomstats.evaluate.run import evaluate

    s = evaluate(args.items, args.model, args.out, samples=args.samples, limit=args.limit,
                 concurrency=args.concurrency, cache_dir=None if args.no_cache else args.cache_dir,
                 progress=not args.no_progress)
    print(f"{s.model}: {s.n_answered} answered ({s.n_cached} from cache, {s.n_requests} "
          f"requests), {s.n_errors} errors, {s.n_skipped} already in {s.out}; "
          f"{s.wall_s:.1f} s")
    if s.n_errors:
        print(f"tomstats evaluate: {s.n_errors} question(s) ended in an error after the retry "
              "budget; re-run the same command to try them again", file=sys.stderr)
        return 1
    return 0
