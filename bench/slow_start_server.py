"""A minimal MCP server for the connect benchmark: waits ``argv[1]`` seconds, then answers.

Standard library only (no SDK import), so its start is I/O-bound like a server that waits on a
network or a database, not CPU-bound: ten of them starting at once measure the host, not the CPU.
"""

import json
import sys
import time

time.sleep(float(sys.argv[1]))
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "slow-start", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": "noop", "inputSchema": {"type": "object"}}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()
