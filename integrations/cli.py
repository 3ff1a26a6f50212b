"""The `mcp-interceptors` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import anyio


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return anyio.run(run_demo, sys.stdout)


def _conformance(args: argparse.Namespace) -> int:
    from interceptors_server.conformance import run_conformance

    async def main() -> tuple[int, int]:
        return await run_conformance(args.paths, mode=args.mode, verbose=args.verbose, transport=args.transport)

    try:
        passed, failed = anyio.run(main)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1 if failed or not passed else 0


def _policy(args: argparse.Namespace) -> int:
    from interceptors.policy import PolicyError, policy_check, policy_show

    if args.action == "show":
        try:
            print(policy_show(args.target[0] if args.target else None))
        except (PolicyError, FileNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if not args.target:
        print("error: policy check needs at least one FILE", file=sys.stderr)
        return 2
    failed = False
    for file in args.target:
        problems = policy_check(file)
        for problem in problems:
            print(problem)
        if problems:
            failed = True
        else:
            print(f"{file}: ok")
    return 1 if failed else 0


def _bench(args: argparse.Namespace) -> int:
    try:
        from bench.runner import main as bench_main
    except ModuleNotFoundError as exc:
        if exc.name not in ("bench", "bench.runner"):
            raise
        print("error: the benchmark package is not installed", file=sys.stderr)
        return 2
    code: int = bench_main(args)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-interceptors", description=__doc__)
    parser.add_argument("--version", action="version", version=f"mcp-interceptors {_version()}")
    _add_verbosity(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the embedded demo: a tool server behind two interceptors")
    demo.set_defaults(func=_demo)

    conformance = sub.add_parser("conformance", help="replay SEP-2624 conformance fixtures")
    conformance.add_argument("paths", nargs="+", help="fixture files or folders (searched recursively)")
    conformance.add_argument(
        "--mode",
        choices=("auto", "legacy"),
        default="auto",
        help="protocol era of the in-memory session with --transport mcp (default: auto = 2026-07-28)",
    )
    conformance.add_argument(
        "--transport",
        choices=("inprocess", "mcp"),
        default="inprocess",
        help="how the chain reaches the interceptors: a function call (default) or an MCP session in memory",
    )
    conformance.set_defaults(func=_conformance)

    policy = sub.add_parser("policy", help="show the effective policy (secrets masked) or check policy files")
    policy.add_argument("action", choices=("show", "check"))
    policy.add_argument("target", nargs="*", help="a built-in profile name or a policy file (show); files (check)")
    policy.set_defaults(func=_policy)

    bench = sub.add_parser("bench", help="measure the chain against baselines taken in the same run")
    bench.add_argument("--json", action="store_true", help="print JSON instead of a table")
    bench.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    bench.add_argument(
        "--quality", action="store_true", help="detection quality per detector family (needs the dev extra)"
    )
    bench.set_defaults(func=_bench)

    from .gateway.cli import add_proxy_command
    from .inspect_cli import add_commands

    add_commands(sub)
    add_proxy_command(sub)
    for command in sub.choices.values():  # -v/-q after the subcommand too (`proxy -v -- CMD`)
        _add_verbosity(command, top_level=False)
    return parser


def _add_verbosity(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    # Given after the subcommand, a flag must not reset what was given before it: no default there.
    default: object = 0 if top_level else argparse.SUPPRESS
    parser.add_argument(
        "-v", "--verbose", action="count", default=default,
        help="more detail on stderr: -v for INFO (with tracebacks of handler crashes), -vv for DEBUG",
    )  # fmt: skip
    parser.add_argument("-q", "--quiet", action="count", default=default, help="errors only on stderr")


def log_level(verbose: int, quiet: int) -> int:
    """WARNING by default (restarts, crashes and give-ups are warnings); -v INFO, -vv DEBUG, -q ERROR."""
    if quiet:
        return logging.ERROR
    if verbose >= 2:
        return logging.DEBUG
    return logging.INFO if verbose else logging.WARNING


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("mcp-interceptors")
    except Exception:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=log_level(args.verbose, args.quiet),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if os.environ.get("MCP_INTERCEPTORS_OTEL"):  # the standard OTEL_* variables configure the SDK (otel.py)
        from .otel import configure_from_env

        configure_from_env()
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # the reader went away (`| head`): not an error worth a traceback
        sys.stderr.close()
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
