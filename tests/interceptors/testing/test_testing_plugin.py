"""The pytest plugin: the marker, the fixtures and the Hypothesis profiles, in separate pytest processes.

The plugin is loaded with `-p integrations.pytest_plugin`, which works whether or not the package's
`pytest11` entry point is installed (the entry point carries the module's own name).
"""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import ROOT

pytest_plugins = ["pytester"]

GHP = "gh" + "p_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"
TINY_POLICY = """\
name: tiny
transforms:
  - type: redact
    strategies: {secret: redact}
detectors:
  - {name: ticket_secret, pattern: 'TKT-[A-Z0-9]{12}', hints: [tkt-], category: secret, entity: ticket_secret}
"""


def run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makefile(".yaml", policy=TINY_POLICY)
    pytester.makepyfile(test_suite=textwrap.dedent(source))
    return pytester.runpytest_subprocess("-p", "integrations.pytest_plugin", "-p", "no:cacheprovider", *args)


def test_the_marker_runs_the_standard_properties(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        import pytest

        @pytest.mark.redaction_rules("standard", properties=["whole_values", "sensitive_keys"])
        def test_marked_without_a_body():
            pass

        @pytest.mark.redaction_rules("policy.yaml", properties=["no_leak"], profile="ci")
        def test_marked_with_the_fixture(redaction_suite):
            assert redaction_suite.target.name == "tiny"
            assert [f.name for f in redaction_suite.target.formats()][0] == "ticket_secret"
            assert redaction_suite.run() == ["no_leak"]

        @pytest.mark.redaction_rules({"transforms": [{"type": "redact", "strategies": {"secret": "redact"},
                                                       "key_rules": ["account_id_key"]}]},
                                     properties=["sensitive_keys"])
        def test_a_weakened_policy_fails():
            pass

        @pytest.mark.redaction_rules("open")
        def test_a_policy_that_redacts_nothing_fails():
            pass

        @pytest.mark.redaction_rules("open", expect_no_redaction=True, properties=["decoys_survive"])
        def test_unless_the_test_says_so():
            pass
        """,
    )
    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_a_weakened_policy_fails*",
            "*PropertyFailures: 1 redaction property failed:*",
            "*- sensitive_keys: Leak*",
        ]
    )
    result.stdout.fnmatch_lines(["*- redacts_something: AssertionError: policy 'open' redacts nothing*"])


def test_the_fixtures_host_chain_policy_and_gateway(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        f"""
        import sys

        import anyio
        from mcp import Client

        from interceptors import Mutation, Registry

        GHP = {GHP!r}
        ROOT = {str(ROOT)!r}

        def shouting():
            registry = Registry()

            @registry.mutator("shout", events="tools/call", phase="response")
            def shout(invocation):
                return Mutation({{**invocation.payload, "note": "HI"}})

            return registry

        def test_policy_file(policy_file):
            assert policy_file("policy.yaml").name == "tiny"
            assert policy_file("standard").name == "standard"

        def test_interceptor_host(interceptor_host):
            host = interceptor_host(shouting())
            assert [item["name"] for item in host.list(None)["interceptors"]] == ["shout"]
            params = {{"name": "shout", "event": "tools/call", "phase": "response", "payload": {{"content": []}}}}
            answer = anyio.run(host.invoke, params)
            assert answer["payload"]["note"] == "HI"

        def test_local_chain_of_a_registry_and_a_policy(local_chain):
            async def go():
                async with local_chain(shouting(), "policy.yaml") as chain:
                    payload = {{"content": [{{"type": "text", "text": "key TKT-ABCDEFGH1234 " + GHP}}]}}
                    return await chain.execute("tools/call", "response", payload, direction="sending")

            result = anyio.run(go)
            text = result.final_payload["content"][0]["text"]
            assert text == "key [REDACTED:ticket_secret] [REDACTED:api_token]" and result.final_payload["note"] == "HI"

        def test_gateway_around_an_upstream(interceptor_gateway):
            async def go():
                upstream = [sys.executable, "-m", "tests.servers.upstream_server"]
                async with interceptor_gateway(upstream, "policy.yaml", cwd=ROOT) as gateway:
                    async with Client(gateway.server) as client:
                        return await client.call_tool("echo", {{"text": "key TKT-ABCDEFGH1234"}})

            result = anyio.run(go)
            assert result.content[0].text == "key [REDACTED:ticket_secret]"
        """,
    )
    result.assert_outcomes(passed=4)


def test_the_profiles_are_registered_before_hypothesis_reads_its_option(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = """
        from hypothesis import settings

        def test_profile():
            print("PROFILE", settings.get_current_profile_name(), settings.default.max_examples)
        """
    thorough = run(pytester, source, "-s", "--hypothesis-profile=thorough")
    thorough.assert_outcomes(passed=1)
    thorough.stdout.fnmatch_lines(["*PROFILE thorough 1000*"])
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")
    ci = run(pytester, source, "-s")
    ci.stdout.fnmatch_lines(["*PROFILE ci 100*"])
