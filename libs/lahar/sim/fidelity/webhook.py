"""An AdmissionReview server for the fidelity sequence: HTTPS on 127.0.0.1 with its own CA,
recording every review it gets and answering by path (``/allow``, ``/deny``, ``/mutate``).

Each server under comparison calls its own instance, so the reviews each one sends can be
compared field by field (what Lahar's admission webhook has to understand).
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from lahar.infra.certs import make_pair

Obj = dict[str, Any]
DENIAL = "fidelity says no"
MUTATION = [{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]


class WebhookServer:
    def __init__(self) -> None:
        self.reviews: list[tuple[str, Obj]] = []  # (path without query, request)
        self._lock = threading.Lock()
        pair = make_pair(["127.0.0.1"], ca_name="lahar-fidelity-ca")
        self.ca_bundle = base64.b64encode(pair.ca).decode()
        with tempfile.TemporaryDirectory(prefix="lahar-fidelity-hook-") as tmp:
            files = pair.write(Path(tmp))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(files.cert, files.key)
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, name="fidelity-webhook", daemon=True)
        self._thread.start()

    def record(self, path: str, request: Obj) -> None:
        with self._lock:
            self.reviews.append((path, request))

    def taken(self) -> list[tuple[str, Obj]]:
        """The reviews so far, and forget them."""
        with self._lock:
            out, self.reviews = self.reviews, []
        return out

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


def _handler(server: WebhookServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            request = review.get("request") or {}
            path = self.path.partition("?")[0]
            server.record(path, request)
            response: Obj = {"uid": request.get("uid", ""), "allowed": True}
            if path == "/deny":
                response = {"uid": request.get("uid", ""), "allowed": False, "status": {"code": 403, "message": DENIAL}}
            elif path == "/mutate":
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(MUTATION).encode()).decode()
            body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

    return Handler
