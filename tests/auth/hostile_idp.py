"""A hostile or failing enterprise IdP for the SEP-990 attack tests: its token endpoint answers per MODE.

usage: PORT=... python hostile_idp.py MODE   (refuse | not-a-jag | garbage | ok)
GET /test/requests answers how many token requests it got.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

MODE = sys.argv[1]
COUNT = {"requests": 0}
JAG = "eyJhbGciOiJFUzI1NiIsInR5cCI6Im9hdXRoLWlkLWphZytqd3QifQ.eyJzdWIiOiJ4In0.c2ln"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self, status: int, body: object) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer(200, COUNT)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        COUNT["requests"] += 1
        if MODE == "refuse":
            self._answer(400, {"error": "invalid_grant", "error_description": "the ID token expired"})
        elif MODE == "not-a-jag":
            self._answer(
                200, {"access_token": "opaque", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}
            )
        elif MODE == "garbage":
            self._answer(200, b"<html>not json</html>")
        else:
            self._answer(200, {"access_token": JAG, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag"})


HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
