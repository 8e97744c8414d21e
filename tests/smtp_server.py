"""SMTP servers for the tests: aiosmtpd's ``Controller`` on a free loopback port, keeping every
message it is given. ``smtp_server`` is plain SMTP; ``smtp_tls_server`` asks for STARTTLS and a
login, with a self-signed certificate made for 127.0.0.1 (``cryptography``) that the client is
told to trust through ``SSL_CERT_FILE``, so the certificate is really checked.

    def test_something(smtp_server, settings):
        smtp_server.use(settings)           # Django's SMTP backend, pointed at the server
        ...
        message = smtp_server.wait_for("someone@example.org")
"""

from __future__ import annotations

import datetime
import email
import email.policy
import ipaddress
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from config.mail import smtp_settings
from tests.live_gunicorn import free_port

WAIT_S = 20
USERNAME = "mailer@example.org"
PASSWORD = "p@ss:word/1"


@dataclass
class SmtpServer:
    url: str
    messages: list[EmailMessage] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    async def handle_DATA(self, server, session, envelope) -> str:  # aiosmtpd's handler hook
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self.arrived:
            self.messages.append(message)
            self.arrived.notify_all()
        return "250 Message accepted"

    def use(self, settings) -> None:
        """Points Django's mail at this server, as ``ARBITER_EMAIL_URL`` would."""
        for name, value in smtp_settings(self.url).items():
            setattr(settings, name, value)

    def wait_for(self, to: str, count: int = 1) -> EmailMessage:
        """The ``count``-th message to ``to``, waiting up to WAIT_S seconds for it."""
        deadline = time.monotonic() + WAIT_S
        with self.arrived:
            while True:
                found = [m for m in self.messages if m["To"] == to]
                if len(found) >= count:
                    return found[count - 1]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no message {count} to {to} in {WAIT_S} s")
                self.arrived.wait(left)

    def to(self, address: str) -> list[EmailMessage]:
        with self.arrived:
            return [m for m in self.messages if m["To"] == address]


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "smtp.pem", folder / "smtp.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _authenticator(server, session, envelope, mechanism, auth_data) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and (
        auth_data.login.decode(),
        auth_data.password.decode(),
    ) == (USERNAME, PASSWORD)
    return AuthResult(success=ok)


def _started(server: SmtpServer, port: int, **options) -> Controller:
    controller = Controller(server, hostname="127.0.0.1", port=port, **options)
    controller.start()
    return controller


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    port = free_port()
    server = SmtpServer(url=f"smtp://127.0.0.1:{port}")
    controller = _started(server, port)
    yield server
    controller.stop()


@pytest.fixture
def smtp_tls_server(tmp_path, monkeypatch) -> Iterator[SmtpServer]:
    pytest.importorskip("cryptography", reason="the self-signed certificate needs cryptography")
    from urllib.parse import quote

    cert_path, key_path = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_path))  # the client trusts this one only
    port = free_port()
    credentials = f"{quote(USERNAME, safe='')}:{quote(PASSWORD, safe='')}"
    server = SmtpServer(url=f"smtp+tls://{credentials}@127.0.0.1:{port}")
    controller = _started(
        server,
        port,
        tls_context=context,
        require_starttls=True,
        auth_required=True,
        authenticator=_authenticator,
    )
    yield server
    controller.stop()
