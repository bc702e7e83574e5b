"""Behind a TLS-inspecting proxy: the CA bundle the user set for mcpmux must reach the servers it starts.

Machines like this one trust a private CA through ``SSL_CERT_FILE`` (see /etc/pip.conf); a child that
does not inherit it cannot verify anything. The real thing, on loopback only: an HTTPS page whose
certificate is signed by a private CA, ``SSL_CERT_FILE`` naming that CA in mcpmux's environment (not in
the server's ``env``), and ``mcp-server-fetch`` (PyPI, SDK 2.x) asked through ``mcpmux call`` to fetch it.
"""

from __future__ import annotations

import contextlib
import datetime
import http.server
import ipaddress
import json
import os
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.field.faces import mcpmux_argv, write_config
from tests.field.processes import FIELD_MARKER
from tests.field.servers import field_venv_bin
from tests.peers.fixtures import http_thread

pytestmark = [pytest.mark.slow, pytest.mark.field, pytest.mark.subprocess, pytest.mark.network]

CALL_TIMEOUT_S = 120


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str, issuer: str, key: ec.EllipticCurvePrivateKey, signer: ec.EllipticCurvePrivateKey, ca: bool
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        builder = builder.add_extension(san, critical=False)
    return builder.sign(signer, hashes.SHA256())


def _private_ca(directory: Path) -> tuple[Path, Path, Path]:
    """``(ca.pem, server.pem, server.key)``: a private CA and a certificate for 127.0.0.1 it signed."""
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("mcpmux field test CA", "mcpmux field test CA", ca_key, ca_key, ca=True)
    server = _certificate("127.0.0.1", "mcpmux field test CA", server_key, ca_key, ca=False)
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key = server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    paths[2].write_bytes(key)
    return paths


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        found = self.path == "/page.html"
        body = f"<html><body><p>{FIELD_MARKER}</p></body></html>".encode() if found else b"not here"
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@contextlib.contextmanager
def _https_page(certificate: Path, key: Path) -> Iterator[str]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    with http_thread(_Page, wrap=lambda listening: context.wrap_socket(listening, server_side=True)) as port:
        yield f"https://127.0.0.1:{port}/page.html"


def _fetch_through_mcpmux(tmp_path: Path, server_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    ca, certificate, key = _private_ca(tmp_path)
    fetch = {
        "name": "fetch",
        "type": "stdio",
        "command": field_venv_bin(2, "mcp-server-fetch"),
        "args": ["--allow-private-ips"],
        "env": {key: value.replace("CA_FILE", str(ca)) for key, value in server_env.items()},
    }
    config = write_config(tmp_path / "mcpmux.yaml", [fetch])
    env = dict(os.environ) | {"SSL_CERT_FILE": str(ca), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    with _https_page(certificate, key) as url:
        return subprocess.run(
            mcpmux_argv(config, "call", "fetch:fetch", json.dumps({"url": url}), "--json"),
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=CALL_TIMEOUT_S, check=False,
        )  # fmt: skip


def test_a_server_given_the_ca_bundle_in_its_env_fetches_the_private_https_page(tmp_path: Path) -> None:
    done = _fetch_through_mcpmux(tmp_path, {"SSL_CERT_FILE": "CA_FILE", "NO_PROXY": "127.0.0.1"})
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout[-800:]} {done.stderr[-800:]}"
    assert FIELD_MARKER in done.stdout, done.stdout[-800:]


def test_a_server_inherits_the_ca_bundle_set_for_mcpmux(tmp_path: Path) -> None:
    done = _fetch_through_mcpmux(tmp_path, {"NO_PROXY": "127.0.0.1"})
    # mcp-server-fetch reports a failed verification as a "connection issue" (the control test above
    # shows the same connection succeeds once the server has the variable).
    signatures = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed", "due to a connection issue")
    certificate_error = any(signature in done.stdout for signature in signatures)
    if done.returncode != 0 and not certificate_error:
        pytest.fail(f"failed, but not on the certificate (item 3): {done.stdout[-800:]} {done.stderr[-800:]}")
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout[-800:]} {done.stderr[-800:]}"
    assert FIELD_MARKER in done.stdout, done.stdout[-800:]
