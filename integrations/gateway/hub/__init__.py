"""One gateway in front of several MCP servers (issue 35, doc/GATEWAY.md): the gateway file (`config.py`), the
namespacing of the merged catalog (`names.py`), one supervised upstream per server (`legs.py`), the aggregated
endpoint (`aggregate.py`), the process serving them on stdio or HTTP (`serve.py`), its `/metrics`
(`metrics.py`) and `proxy --config` (`cli.py`)."""
