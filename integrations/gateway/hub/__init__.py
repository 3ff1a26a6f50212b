"""One gateway in front of several MCP servers (issue 35): the gateway file (`config.py`), the namespacing of
the merged catalog (`names.py`), one upstream leg per server (`legs.py`) and the aggregated endpoint
(`aggregate.py`). doc/GATEWAY.md describes the whole."""
