"""Configuration the ecosystem's way (issue 32): every `proxy` and `serve` option also read from
`MCP_INTERCEPTORS_<OPTION>` (documented in `--help`, the command line wins, a bad value names its variable),
and `--log-format json`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from integrations.cli import ENVIRONMENT_COMMANDS, build_parser, env_name
from tests.conftest import ROOT
from tests.integrations.gateway.test_gateway import STEP_S, UPSTREAM


def _subcommand(name: str) -> object:
    parser = build_parser({})
    sub = next(action for action in parser._actions if action.dest == "command")
    return sub.choices[name]  # type: ignore[attr-defined]


def test_every_proxy_and_serve_option_has_a_variable_named_in_help() -> None:
    for command in ENVIRONMENT_COMMANDS:
        parser = _subcommand(command)
        text = parser.format_help()  # type: ignore[attr-defined]
        flat = " ".join(text.split())
        for action in parser._actions:  # type: ignore[attr-defined]
            if action.dest in ("help", "verbose", "quiet", "log_format") or not action.option_strings:
                continue
            assert f"[env {env_name(action)}]" in flat, (command, action.option_strings)
    assert env_name(next(a for a in _subcommand("proxy")._actions if a.dest == "max_line_mib")) == (  # type: ignore[attr-defined]
        "MCP_INTERCEPTORS_MAX_LINE_MIB"
    )


def test_the_environment_sets_options_and_the_command_line_wins() -> None:
    environ = {
        "MCP_INTERCEPTORS_POLICY": "strict",
        "MCP_INTERCEPTORS_MAX_LINE_MIB": "8",
        "MCP_INTERCEPTORS_RESTART_UPSTREAM": "yes",
        "MCP_INTERCEPTORS_EXPOSE_INTERCEPTORS": "off",
        "MCP_INTERCEPTORS_REGISTRY": "a.b:c, d.e:f",
        "MCP_INTERCEPTORS_UPSTREAM_HEADER": "Authorization: Bearer x, y\nX-Team: blue",
        "MCP_INTERCEPTORS_UPSTREAM_TIMEOUT": "",  # empty: as if unset
    }
    args = build_parser(environ).parse_args(["proxy", "--", "server"])
    assert args.policy == "strict" and args.max_line_mib == 8 and args.restart_upstream is True
    assert args.expose_interceptors is False and args.registry == ["a.b:c", "d.e:f"]
    assert args.upstream_header == ["Authorization: Bearer x, y", "X-Team: blue"]
    assert args.upstream_timeout == 300.0
    assert build_parser(environ).parse_args(["proxy", "--policy", "open", "--", "s"]).policy == "open"
    served = build_parser({"MCP_INTERCEPTORS_HTTP": "127.0.0.1:0"}).parse_args(["serve"])
    assert served.http == "127.0.0.1:0"


def run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "integrations.cli", *argv], cwd=ROOT, capture_output=True, text=True,
        timeout=STEP_S, stdin=subprocess.DEVNULL, env={**os.environ, **env},
    )  # fmt: skip


@pytest.mark.slow
def test_proxy_reads_the_policy_from_the_environment_and_a_bad_value_names_its_variable(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-policy.yaml"
    done = run("proxy", "--", *UPSTREAM, env={"MCP_INTERCEPTORS_POLICY": str(missing)})
    assert done.returncode == 2 and "no-such-policy.yaml" in done.stderr, done.stderr
    bad = run("proxy", "--", *UPSTREAM, env={"MCP_INTERCEPTORS_MAX_LINE_MIB": "lots"})
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: MCP_INTERCEPTORS_MAX_LINE_MIB: 'lots' is not a valid value for --max-line-mib"


@pytest.mark.slow
def test_log_format_json_writes_one_object_per_log_line(tmp_path: Path) -> None:
    chain = tmp_path / "chain.yaml"
    chain.write_text("servers:\n  - name: gone\n    url: http://127.0.0.1:9/mcp\n")
    for argv, env in (
        (["-v", "--log-format", "json", "proxy", "--chain", str(chain), "--", *UPSTREAM], {}),
        (["proxy", "-v", "--chain", str(chain), "--", *UPSTREAM], {"MCP_INTERCEPTORS_LOG_FORMAT": "json"}),
    ):
        done = run(*argv, env=env)
        assert done.returncode == 1
        lines = done.stderr.splitlines()
        assert lines[-1].startswith("error: interceptor server 'gone' is unavailable")  # the one-line verdict
        records = [json.loads(line) for line in lines[:-1]]
        assert records and {"time", "level", "logger", "message"} <= set(records[0])
        assert any(record["level"] == "WARNING" and "'gone'" in record["message"] for record in records)
        assert any("exception" in record for record in records)  # -v: the cause, inside its record
