"""TLS for the Pulsar port (``pulsar+ssl://``) and the admin API (https), on Twisted's TLS with pyOpenSSL.

:func:`server_options` reads the PEM files of the settings once, at start-up: the server's certificate (with its
chain) and key, and the CAs client certificates must chain to. A client certificate is asked for and, when one
is sent, verified against those CAs: one that does not verify fails the handshake with an alert, as Pulsar 4.2.4's
broker ends it (TLS 1.2) or the session right after it (TLS 1.3; the client learns it at its first read) with an
alert, so the clients retry as after a lost connection (conformance scenario
``authentication.raw_untrusted_client_certificate``; OpenSSL's alert says ``unknown_ca`` where Pulsar's says
``internal_error``). The certificate request names the trusted CAs. A client that sends no certificate goes on,
and the ``tls`` provider refuses its CONNECT. With
``tls-require-trusted-client-cert`` a client without a trusted certificate fails the handshake too. Anything
unreadable is a SettingsError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.config import Settings, SettingsError


def verified_peer_certificate(transport: Any) -> Any:
    """The client certificate of a TLS transport (a pyOpenSSL X509: it verified, else the handshake failed); None
    without one, and on a plain transport."""
    getter = getattr(transport, "getPeerCertificate", None)
    return None if getter is None else getter()


def tls_wanted(settings: Settings) -> bool:
    """Whether a TLS port is configured."""
    return settings.tls_port is not None or settings.admin_tls_port is not None


def _read(path: str | None, setting: str) -> bytes:
    if not path:
        raise SettingsError(f"{setting} is required with tls-port or admin-tls-port")
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SettingsError(f"{setting}: cannot read {path}: {exc.strerror or exc}") from None


def _certificates(path: str | None, setting: str) -> list[Any]:
    from cryptography import x509

    data = _read(path, setting)
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise SettingsError(f"{setting}: {path} holds no PEM certificate") from None


def server_options(settings: Settings) -> Any:
    """The Twisted ``IOpenSSLServerConnectionCreator`` of both TLS ports."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from OpenSSL import SSL, crypto
    from twisted.internet import ssl

    chain = _certificates(settings.tls_cert_file, "tls-cert-file")
    try:
        key = load_pem_private_key(_read(settings.tls_key_file, "tls-key-file"), password=None)
    except (ValueError, TypeError) as exc:
        raise SettingsError(
            f"tls-key-file: {settings.tls_key_file} holds no unencrypted PEM private key: {exc}"
        ) from None
    trusted: list[Any] = []
    if settings.tls_trust_certs_file:
        trusted = [
            crypto.X509.from_cryptography(c)
            for c in _certificates(settings.tls_trust_certs_file, "tls-trust-certs-file")
        ]
    elif settings.tls_require_trusted_client_cert:
        raise SettingsError("tls-require-trusted-client-cert needs tls-trust-certs-file")
    try:
        options = ssl.CertificateOptions(
            privateKey=key,
            certificate=chain[0],
            extraCertChain=chain[1:],
            verify=bool(trusted),
            caCerts=trusted or None,
            requireCertificate=settings.tls_require_trusted_client_cert,
            raiseMinimumTo=ssl.TLSVersion.TLSv1_2,
        )
        context = options.getContext()  # built now, so that a key not matching the certificate fails start-up
    except (ValueError, TypeError, SSL.Error) as exc:
        raise SettingsError(f"tls-cert-file / tls-key-file: cannot be used together: {exc}") from None
    for certificate in trusted:
        # The certificate request names the trusted CAs, as Pulsar's does: a client that picks its certificate by
        # them (the Java client) then sends none rather than another CA's, and its CONNECT is refused.
        context.add_client_ca(certificate)
    return options


def wrap(factory: Any, options: Any) -> Any:
    """``factory``'s Pulsar connections spoken over TLS with ``options`` (see :func:`server_options`).

    Twisted hands a connection each TLS record (at most 16 KiB) of a network read as a read of its own: a large
    frame would arrive in many pieces, and many small SENDs would be answered in as many encrypted writes. The
    connection is told where the network read begins and ends (``begin_read``, ``end_read``) and handles what it
    decrypted to as one read, as on the plain port.
    """
    from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol

    class WholeReads(TLSMemoryBIOProtocol):
        def dataReceived(self, data: bytes) -> None:  # noqa: N802 (Twisted's name)
            connection = self.wrappedProtocol
            connection.begin_read()
            try:
                super().dataReceived(data)
            finally:
                connection.end_read()

    tls = TLSMemoryBIOFactory(options, False, factory)
    tls.protocol = WholeReads
    return tls
