"""The `mcp-interceptors` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

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
        print(
            "error: the benchmarks are not installed with the package: run `mcp-interceptors bench` from a checkout "
            "of the repository (pip install -e .)",
            file=sys.stderr,
        )
        return 2
    try:
        code: int = bench_main(args)
    except ImportError as exc:  # --quality draws its corpus with the testing kit
        if (exc.name or "").split(".", 1)[0] not in ("hypothesis", "pytest", "_pytest"):
            raise
        extra = 'pip install "mcp-interceptors[testing]"'
        print(f"error: bench --quality needs the testing extra: {extra}", file=sys.stderr)
        return 2
    return code


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
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
    problems: list[str] = []
    for name in ENVIRONMENT_COMMANDS:
        problems += environment_defaults(sub.choices[name], os.environ if environ is None else environ)
    parser.set_defaults(environment_problems=problems)
    return parser


ENV_PREFIX = "MCP_INTERCEPTORS_"
ENVIRONMENT_COMMANDS = ("proxy", "serve")
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off", ""})
_NOT_FROM_ENVIRONMENT = frozenset({"help", "verbose", "quiet", "log_format"})


def env_name(action: argparse.Action) -> str:
    """`--max-line-mib` → `MCP_INTERCEPTORS_MAX_LINE_MIB`: the first long option's name, upper case."""
    long = next(option for option in action.option_strings if option.startswith("--"))
    return ENV_PREFIX + long[2:].upper().replace("-", "_")


def environment_defaults(parser: argparse.ArgumentParser, environ: Mapping[str, str]) -> list[str]:
    """Every option of `parser` also read from `MCP_INTERCEPTORS_<OPTION>` (the command line wins; an empty value
    is as if unset): a flag takes 1/true/yes/on or 0/false/no/off, a repeatable option several values separated
    by commas (one header per line for `--upstream-header`). Returns the problems (a value that is not one), each
    naming its variable and never quoting more than the start of the value."""
    problems: list[str] = []
    for action in parser._actions:
        if not any(option.startswith("--") for option in action.option_strings) or action.dest in _NOT_FROM_ENVIRONMENT:
            continue
        name = env_name(action)
        action.help = f"{action.help or ''} [env {name}]".strip()
        raw = environ.get(name)
        if raw is None or not raw.strip():  # empty: as if unset
            continue
        try:
            value = _env_value(action, raw)
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            problems.append(f"{name}: {raw[:60]!r} is not a valid value for {action.option_strings[0]}")
            continue
        action.default = value
        action.required = False
    return problems


def _env_value(action: argparse.Action, raw: str) -> Any:
    flag = isinstance(action, argparse._StoreTrueAction | argparse.BooleanOptionalAction)
    if flag:
        word = raw.strip().lower()
        if word not in _TRUE | _FALSE:
            raise ValueError(raw)
        return word in _TRUE
    convert: Any = action.type or str
    if isinstance(action, argparse._AppendAction):
        separator = "\n" if action.dest == "upstream_header" else ","
        return [convert(item.strip()) for item in raw.split(separator) if item.strip()]
    value = convert(raw)
    if action.choices is not None and value not in action.choices:
        raise ValueError(raw)
    return value


def _add_verbosity(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    # Given after the subcommand, a flag must not reset what was given before it: no default there.
    default: object = 0 if top_level else argparse.SUPPRESS
    parser.add_argument(
        "-v", "--verbose", action="count", default=default,
        help="more detail on stderr: -v for INFO (with tracebacks of handler crashes), -vv for DEBUG",
    )  # fmt: skip
    parser.add_argument("-q", "--quiet", action="count", default=default, help="errors only on stderr")
    log_default: object = os.environ.get(ENV_PREFIX + "LOG_FORMAT", "text") if top_level else argparse.SUPPRESS
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=log_default,
        help=f"log lines on stderr as text (default) or one JSON object per line [env {ENV_PREFIX}LOG_FORMAT]",
    )


class JsonFormatter(logging.Formatter):
    """`--log-format json`: one JSON object per line (time, level, logger, message, and the traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        import json
        from datetime import UTC, datetime

        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


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
    if getattr(args, "command", None) in ENVIRONMENT_COMMANDS and args.environment_problems:
        for problem in args.environment_problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    handler = logging.StreamHandler(sys.stderr)
    if getattr(args, "log_format", "text") == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=log_level(args.verbose, args.quiet), handlers=[handler])
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
