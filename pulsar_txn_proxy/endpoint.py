"""A throw-away endpoint for tests: ``pulsar-txn-proxy serve`` in a child process on free ports and a temp store.

Used by the pytest plugin (:mod:`pulsar_txn_proxy.pytest_plugin`) and usable on its own::

    with PulsarEndpoint(default_partitions=3) as endpoint:
        client = pulsar.Client(endpoint.service_url)
        namespace = endpoint.create_namespace()         # public/test-<random>, through the admin API
        producer = client.create_producer(namespace.topic("orders"))

Server options are keyword arguments in snake case (``default_partitions=3`` is ``--default-partitions 3``,
``transaction_coordinators=0`` turns transactions off, ``deduplication=True`` is ``--deduplication``); ``args``
adds raw command-line arguments. ``tls=True`` makes a self-signed certificate for ``localhost`` / ``127.0.0.1``
and opens the TLS ports; ``auth="token"`` turns token authentication on with a fresh secret key and hands back a
token (``endpoint.token``) whose role may do anything.

Only the standard library is imported here (the plugin loads in every pytest session of whoever installs the
package); ``cryptography`` and ``PyJWT`` are imported when TLS or tokens are asked for.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The role of :attr:`PulsarEndpoint.token`, made a super-user of the endpoint.
SUPERUSER_ROLE = "test-superuser"
#: How many times a start is tried again on new ports when a port taken meanwhile makes it fail.
_PORT_ATTEMPTS = 3
#: What the server logs or prints when one of its ports is taken.
_PORT_TAKEN = ("Address already in use", "cannot listen on port")


class EndpointError(RuntimeError):
    """The endpoint did not start (the message carries its log), or an admin call failed."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def default_command() -> list[str]:
    """How the server is started: this interpreter running ``python -m proxy`` (the installed package)."""
    return [sys.executable, "-m", "proxy"]


@dataclass(frozen=True)
class EndpointSettings:
    """What an endpoint is started with; equal settings may share one endpoint."""

    #: Server options by their snake-case name (``default_partitions``), sorted.
    options: tuple[tuple[str, Any], ...] = ()
    tls: bool = False
    #: None, or ``"token"``.
    auth: str | None = None
    #: Raw extra arguments of ``serve``.
    args: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, *, tls: bool = False, auth: str | None = None, args: Iterable[str] | str = (), **options: Any
    ) -> EndpointSettings:
        if auth not in (None, "", "none", "token"):
            raise ValueError(f"auth={auth!r}: the endpoint fixtures make credentials for 'token' only")
        if isinstance(args, str):
            args = shlex.split(args)
        clean = {name.replace("-", "_"): value for name, value in options.items() if value is not None}
        return cls(tuple(sorted(clean.items())), bool(tls), None if auth in (None, "", "none") else auth, tuple(args))

    def merged(self, **changes: Any) -> EndpointSettings:
        """These settings with ``changes`` applied (an option set to None is removed)."""
        options = dict(self.options)
        tls, auth, args = self.tls, self.auth, list(self.args)
        for name, value in changes.items():
            if name == "tls":
                tls = bool(value)
            elif name == "auth":
                auth = value
            elif name == "args":
                args += shlex.split(value) if isinstance(value, str) else list(value)
            elif value is None:
                options.pop(name.replace("-", "_"), None)
            else:
                options[name.replace("-", "_")] = value
        return EndpointSettings.of(tls=tls, auth=auth, args=args, **options)

    def command_line(self) -> list[str]:
        """The server options as ``serve`` arguments."""
        argv: list[str] = []
        for name, value in self.options:
            flag = "--" + name.replace("_", "-")
            if value is True:
                argv.append(flag)
            elif value is False:
                argv.append("--no-" + name.replace("_", "-"))
            else:
                argv += [flag, str(value)]
        return argv + list(self.args)


@dataclass
class PulsarNamespace:
    """A namespace created on an endpoint for one test; :meth:`topic` names topics in it."""

    endpoint: AdminClient
    #: ``tenant/namespace``, e.g. ``public/test-1a2b3c4d``.
    name: str

    def topic(self, name: str, *, persistent: bool = True) -> str:
        """The full name of topic ``name`` in this namespace (``persistent://public/test-.../name``)."""
        return f"{'persistent' if persistent else 'non-persistent'}://{self.name}/{name}"

    def create_partitioned_topic(self, name: str, partitions: int) -> str:
        """Create a partitioned topic through the admin API; returns its full name."""
        topic = self.topic(name)
        self.endpoint.admin("PUT", f"/admin/v2/persistent/{self.name}/{name}/partitions", partitions)
        return topic

    def __str__(self) -> str:
        return self.name


class AdminClient:
    """Admin API calls and fresh namespaces on a broker at :attr:`admin_url` (with :attr:`token` when set)."""

    admin_url: str
    token: str | None

    def admin(self, method: str, path: str, body: Any = None, *, timeout: float = 10.0) -> Any:
        """One admin API call (with :attr:`token` when set); the decoded JSON answer (None when empty).
        EndpointError on a status of 400 or above."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.admin_url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                payload = answer.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            raise EndpointError(f"{method} {path} answered {exc.code}: {text}") from None
        return json.loads(payload) if payload.strip() else None

    def create_namespace(self, name: str | None = None) -> PulsarNamespace:
        """Create ``public/<name>`` (default ``test-<random>``) through the admin API."""
        name = name or f"test-{secrets.token_hex(4)}"
        full = name if "/" in name else f"public/{name}"
        self.admin("PUT", f"/admin/v2/namespaces/{full}", {})
        return PulsarNamespace(self, full)


class ExistingBroker(AdminClient):
    """A broker started elsewhere (an Apache Pulsar, or an endpoint of ours), with the interface of
    :class:`PulsarEndpoint` minus the life cycle: the plugin's fixtures hand one out under
    ``--pulsar-endpoint-url``."""

    def __init__(self, service_url: str, admin_url: str, token: str | None = None) -> None:
        self.service_url = service_url
        self.admin_url = admin_url.rstrip("/")
        self.token = token
        self.tls_service_url = self.tls_admin_url = None
        self.tls_cert_file = None

    def __repr__(self) -> str:
        return f"ExistingBroker({self.service_url}, {self.admin_url})"


class PulsarEndpoint(AdminClient):
    """``pulsar-txn-proxy serve`` as a child process on 127.0.0.1, on free ports and its own data directory.

    ``data_dir`` None: a temporary directory, removed by :meth:`stop`. ``command`` is what runs the server
    (default: ``python -m proxy`` with this interpreter); ``serve`` and its options are appended.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        settings: EndpointSettings | None = None,
        command: Sequence[str] | None = None,
        startup_timeout: float = 30.0,
        tls: bool = False,
        auth: str | None = None,
        args: Iterable[str] | str = (),
        **options: Any,
    ) -> None:
        if settings is not None and (tls or auth or args or options):
            raise TypeError("pass either settings= or the options, not both")
        self.settings = settings or EndpointSettings.of(tls=tls, auth=auth, args=args, **options)
        self._own_dir = data_dir is None
        self.data_dir: Path | None = Path(data_dir) if data_dir is not None else None
        self.command: list[str] = list(command) if command else default_command()
        self.startup_timeout = startup_timeout
        self.port = self.admin_port = 0
        self.tls_port: int | None = None
        self.admin_tls_port: int | None = None
        #: PEM certificate and key of the TLS ports (self-signed; clients trust it: ``tls_trust_certs_file_path``).
        self.tls_cert_file: Path | None = None
        self.tls_key_file: Path | None = None
        #: The HMAC key of tokens (``--token-secret-key``), and a token of a role that may do anything.
        self.token_secret_key_file: Path | None = None
        self.token: str | None = None
        #: Seconds from the process start until the admin API answered.
        self.startup_seconds = 0.0
        self.process: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"PulsarEndpoint({self.service_url}, {self.admin_url}, {state})"

    # -- addresses --------------------------------------------------------------------------------------------

    @property
    def service_url(self) -> str:
        """``pulsar://127.0.0.1:<port>`` (the plain port; open with TLS too)."""
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        """``http://127.0.0.1:<admin port>``: the admin REST API and ``/metrics``."""
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def tls_service_url(self) -> str | None:
        """``pulsar+ssl://localhost:<tls port>`` when started with TLS, else None."""
        return f"pulsar+ssl://localhost:{self.tls_port}" if self.tls_port else None

    @property
    def tls_admin_url(self) -> str | None:
        """``https://localhost:<admin tls port>`` when started with TLS, else None."""
        return f"https://localhost:{self.admin_tls_port}" if self.admin_tls_port else None

    @property
    def log_path(self) -> Path:
        assert self.data_dir is not None, "not started"
        return self.data_dir / "server.log"

    # -- life cycle -------------------------------------------------------------------------------------------

    def start(self) -> PulsarEndpoint:
        """Start the server and wait until its admin API answers; EndpointError (with the log) if it does not."""
        if self.process is not None:
            return self
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="pulsar-endpoint-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._make_credentials()
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            self._pick_ports()
            try:
                self._launch()
                return self
            except _PortTakenError:
                if attempt == _PORT_ATTEMPTS:
                    raise EndpointError(f"a port was taken at each of {attempt} starts:\n{self.log()}") from None
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (SIGKILL after ``timeout`` s), and remove the data directory if it was a temporary one.

        Returns the exit code (None if it was not running)."""
        code = self._terminate(timeout)
        if self._own_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return code

    def __enter__(self) -> PulsarEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        """What the server printed so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except (OSError, AssertionError):
            return ""

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except (OSError, AssertionError):
            return 0

    def create_token(self, role: str) -> str:
        """A token for ``role`` signed with the endpoint's secret key (``auth="token"`` only)."""
        if self.token_secret_key_file is None:
            raise EndpointError("this endpoint was started without auth='token'")
        import jwt

        return jwt.encode({"sub": role}, self.token_secret_key_file.read_bytes(), algorithm="HS256")

    # -- internals --------------------------------------------------------------------------------------------

    def _pick_ports(self) -> None:
        self.port, self.admin_port = free_port(), free_port()
        if self.settings.tls:
            self.tls_port, self.admin_tls_port = free_port(), free_port()

    def _make_credentials(self) -> None:
        assert self.data_dir is not None
        if self.settings.tls and self.tls_cert_file is None:
            self.tls_cert_file, self.tls_key_file = _self_signed_certificate(self.data_dir)
        if self.settings.auth == "token" and self.token_secret_key_file is None:
            self.token_secret_key_file = self.data_dir / "secret.key"
            self.token_secret_key_file.write_bytes(secrets.token_bytes(32))
            self.token = self.create_token(SUPERUSER_ROLE)

    def _serve_args(self) -> list[str]:
        assert self.data_dir is not None
        argv = [
            "serve", "--host", "127.0.0.1", "--port", str(self.port), "--admin-port", str(self.admin_port),
            "--data-dir", str(self.data_dir / "store"), "--advertised-address", "127.0.0.1",
        ]  # fmt: skip
        if self.settings.tls:
            argv += [
                "--tls-port", str(self.tls_port), "--admin-tls-port", str(self.admin_tls_port),
                "--tls-cert-file", str(self.tls_cert_file), "--tls-key-file", str(self.tls_key_file),
            ]  # fmt: skip
        if self.settings.auth == "token":
            argv += [
                "--authentication-enabled", "--authentication-providers", "token",
                "--token-secret-key", f"file://{self.token_secret_key_file}", "--super-user-roles", SUPERUSER_ROLE,
            ]  # fmt: skip
        return argv + self.settings.command_line()

    def _launch(self) -> None:
        assert self.data_dir is not None
        offset = self.log_size()
        log = open(self.log_path, "ab")  # noqa: SIM115 (the child keeps it open)
        began = time.monotonic()
        try:
            self.process = subprocess.Popen(
                [*self.command, *self._serve_args()],
                cwd=self.data_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent(),
            )
        finally:
            log.close()
        deadline = began + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                written = self.log()[offset:]
                self.process = None
                if any(sign in written for sign in _PORT_TAKEN):
                    raise _PortTakenError
                raise EndpointError(f"the endpoint exited while starting:\n{written}")
            if self._answers():
                self.startup_seconds = time.monotonic() - began
                return
            if "cannot listen on port" in self.log()[offset:]:
                self._terminate(5)
                raise _PortTakenError
            time.sleep(0.02)
        self._terminate(5)
        raise EndpointError(f"the endpoint did not answer within {self.startup_timeout} s:\n{self.log()[offset:]}")

    def _answers(self) -> bool:
        try:
            self.admin("GET", "/admin/v2/clusters", timeout=1.0)
        except (OSError, EndpointError):
            return False
        return True

    def _terminate(self, timeout: float) -> int | None:
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                return process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
        return process.wait()


def _die_with_parent() -> Callable[[], None] | None:
    """On Linux, from the main thread: make the server receive SIGTERM when this process dies, even by SIGKILL (a CI
    job killed at its timeout leaves no server behind). Elsewhere None (the signal follows the starting thread)."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None

    def set_death_signal() -> None:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    return set_death_signal


class _PortTakenError(Exception):
    """A port picked as free was taken before the server bound it."""


def _self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """An EC P-256 certificate for ``localhost`` and ``127.0.0.1`` (its own CA) and its key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "tls-cert.pem", directory / "tls-key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file
