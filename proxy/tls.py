"""TLS for the Pulsar port (``pulsar+ssl://``) and the admin API (https), on Twisted's TLS with pyOpenSSL.

:func:`server_options` reads the PEM files of the settings once, at start-up: the server's certificate (with its
chain) and key, and the CAs client certificates must chain to. A client certificate is asked for and, when one
is sent, verified against those CAs (a certificate from another CA fails the handshake, as with Pulsar); with
``tls-require-trusted-client-cert`` a client without one is refused too. Anything unreadable is a SettingsError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.config import Settings, SettingsError


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
    from OpenSSL import crypto
    from twisted.internet import ssl

    chain = [crypto.X509.from_cryptography(c) for c in _certificates(settings.tls_cert_file, "tls-cert-file")]
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
        return ssl.CertificateOptions(
            privateKey=crypto.PKey.from_cryptography_key(key),
            certificate=chain[0],
            extraCertChain=chain[1:],
            verify=bool(trusted),
            caCerts=trusted or None,
            requireCertificate=settings.tls_require_trusted_client_cert,
            raiseMinimumTo=ssl.TLSVersion.TLSv1_2,
        )
    except Exception as exc:
        raise SettingsError(f"tls-cert-file / tls-key-file: cannot be used together: {exc}") from None


def wrap(factory: Any, options: Any) -> Any:
    """``factory``'s protocols spoken over TLS with ``options`` (see :func:`server_options`)."""
    from twisted.protocols.tls import TLSMemoryBIOFactory

    return TLSMemoryBIOFactory(options, False, factory)
