"""Settings: command line > ``PULSAR_TXN_PROXY_*`` environment > ``--config`` TOML file > defaults."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.config import Settings, SettingsError, load
from tests.conftest import make_client
from tests.server_process import ROOT, free_port


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


# -- proxy.config.load ---------------------------------------------------------------------------


def test_defaults() -> None:
    settings = load({}, None, {})
    assert settings == Settings()
    assert (settings.host, settings.port, settings.data_dir) == ("0.0.0.0", 6650, "./data")
    assert (settings.default_partitions, settings.deduplication, settings.log_level) == (0, False, "INFO")


def test_file_sets_values(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.toml",
        'host = "127.0.0.1"\nport = 7001\ndata-dir = "/srv/d"\nadvertised_address = "broker.local"\n'
        "default-partitions = 3\ndeduplication = true\nlog-level = \"DEBUG\"\nadmin-port = 9090\n",
    )
    settings = load({}, config, {})
    assert settings == Settings(
        host="127.0.0.1", port=7001, admin_port=9090, data_dir="/srv/d", advertised_address="broker.local",
        default_partitions=3, deduplication=True, log_level="DEBUG",
    )


def test_environment_overrides_file(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.toml", 'port = 7001\ndata-dir = "/from/file"\ndeduplication = false\n')
    environ = {"PULSAR_TXN_PROXY_PORT": "7002", "PULSAR_TXN_PROXY_DEDUPLICATION": "yes", "UNRELATED": "1"}
    settings = load({}, config, environ)
    assert (settings.port, settings.deduplication) == (7002, True)
    assert settings.data_dir == "/from/file"


def test_command_line_overrides_environment_and_file(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.toml", 'port = 7001\nhost = "10.0.0.1"\nlog-level = "ERROR"\n')
    environ = {"PULSAR_TXN_PROXY_PORT": "7002", "PULSAR_TXN_PROXY_HOST": "10.0.0.2"}
    cli = {"port": 7003, "host": None, "deduplication": None, "log_level": None}
    settings = load(cli, config, environ)
    assert settings.port == 7003  # command line
    assert settings.host == "10.0.0.2"  # environment; an option not given (None) does not count
    assert settings.log_level == "ERROR"  # file
    assert settings.deduplication is False  # default


def test_command_line_false_flag_wins(tmp_path: Path) -> None:
    """``--no-deduplication`` (False) is a given option, not an absent one."""
    config = _write(tmp_path / "c.toml", "deduplication = true\n")
    settings = load({"deduplication": False}, config, {"PULSAR_TXN_PROXY_DEDUPLICATION": "1"})
    assert settings.deduplication is False


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", True), ("true", True), ("ON", True), (" yes ", True),
        ("0", False), ("False", False), ("off", False),
    ],
)
def test_environment_booleans(raw: str, expected: bool) -> None:
    assert load({}, None, {"PULSAR_TXN_PROXY_DEDUPLICATION": raw}).deduplication is expected


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"PULSAR_TXN_PROXY_PORT": "abc"}, "port: expected an integer"),
        ({"PULSAR_TXN_PROXY_DEFAULT_PARTITIONS": "2.5"}, "default_partitions: expected an integer"),
        ({"PULSAR_TXN_PROXY_DEDUPLICATION": "maybe"}, "deduplication: expected true or false"),
    ],
)
def test_bad_environment_values(environ: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load({}, None, environ)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bogus = 1\n", "unknown setting 'bogus'"),
        ('port = "x"\n', "port: expected an integer"),
        ("port = true\n", "port: expected an integer"),
        ("port = 1.5\n", "port: expected an integer"),
        ('deduplication = "sometimes"\n', "deduplication: expected true or false"),
        ("deduplication = 1\n", "deduplication: expected true or false"),
        ("port = \n", "cannot read config file"),
    ],
)
def test_bad_file(tmp_path: Path, text: str, message: str) -> None:
    config = _write(tmp_path / "c.toml", text)
    with pytest.raises(SettingsError, match=message):
        load({}, config, {})


def test_log_level(tmp_path: Path) -> None:
    assert load({"log_level": "debug"}, None, {}).log_level == "debug"
    with pytest.raises(SettingsError, match="log_level: expected one of DEBUG, INFO"):
        load({}, _write(tmp_path / "c.toml", 'log-level = "LOUD"\n'), {})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read config file"):
        load({}, str(tmp_path / "absent.toml"), {})


# -- end to end: python -m proxy serve --config ---------------------------------------------------


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULSAR_TXN_PROXY_")}
    env.update(extra)
    return env


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class _Served:
    """``python -m proxy serve ARGS`` as a child process."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "proxy", "serve", *args],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )
        self.log = log

    def wait_for(self, port: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not _accepts(port):
            assert self.process.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, f"port {port} not open:\n{self.log.read_text()}"
            time.sleep(0.02)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(10)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[list[_Served]]:
    started: list[_Served] = []
    yield started
    for proc in started:
        if proc.process.poll() is None:
            proc.process.kill()
            proc.process.wait()


def _roundtrip(port: int) -> None:
    """Produce and consume one message with the official client."""
    client = make_client(f"pulsar://127.0.0.1:{port}")
    try:
        topic = f"persistent://public/default/cfg-{uuid.uuid4().hex[:8]}"
        consumer = client.subscribe(topic, "s")
        msg_id = client.create_producer(topic).send(b"hello")
        msg = consumer.receive(5000)
        assert (msg.data(), msg.message_id()) == (b"hello", msg_id)
    finally:
        client.close()


def test_serve_takes_port_from_file_and_environment_overrides_it(
    tmp_path: Path, served: list[_Served]
) -> None:
    file_port, env_port = free_port(), free_port()
    data = tmp_path / "data"
    config = _write(
        tmp_path / "server.toml",
        f'host = "127.0.0.1"\nport = {file_port}\ndata-dir = "{data}"\nadvertised-address = "127.0.0.1"\n',
    )

    from_file = _Served(["--config", config], _clean_env(), tmp_path / "file.log")
    served.append(from_file)
    from_file.wait_for(file_port)
    _roundtrip(file_port)
    assert from_file.stop() == 0
    assert f"serving pulsar://127.0.0.1:{file_port}, data in {data}" in from_file.log.read_text()

    env = _clean_env(PULSAR_TXN_PROXY_PORT=str(env_port))
    from_env = _Served(["--config", config], env, tmp_path / "env.log")
    served.append(from_env)
    from_env.wait_for(env_port)
    assert not _accepts(file_port)
    _roundtrip(env_port)
    assert from_env.stop() == 0
    assert f"serving pulsar://127.0.0.1:{env_port}" in from_env.log.read_text()
    assert (data / "store.sqlite").exists()


def test_serve_command_line_overrides_environment(tmp_path: Path, served: list[_Served]) -> None:
    file_port, env_port, cli_port = free_port(), free_port(), free_port()
    text = f'host = "127.0.0.1"\nport = {file_port}\ndata-dir = "{tmp_path / "data"}"\n'
    config = _write(tmp_path / "server.toml", text)
    env = _clean_env(PULSAR_TXN_PROXY_PORT=str(env_port))
    proc = _Served(["--config", config, "--port", str(cli_port)], env, tmp_path / "cli.log")
    served.append(proc)
    proc.wait_for(cli_port)
    assert not _accepts(env_port)
    assert not _accepts(file_port)
    _roundtrip(cli_port)
    assert proc.stop() == 0


def test_serve_rejects_unknown_setting(tmp_path: Path) -> None:
    config = _write(tmp_path / "server.toml", f"port = {free_port()}\nmax-connections = 10\n")
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--config", config],
        cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == f"pulsar-txn-proxy: {config}: unknown setting 'max-connections'"


def test_serve_rejects_bad_environment_value(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--data-dir", str(tmp_path / "d")],
        cwd=ROOT, env=_clean_env(PULSAR_TXN_PROXY_PORT="sixty-six"), capture_output=True, text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "port: expected an integer, got 'sixty-six'" in result.stderr


def test_serve_rejects_bad_log_level(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--data-dir", str(tmp_path / "d"), "--log-level", "LOUD"],
        cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2
    assert "log_level: expected one of" in result.stderr
    assert "Traceback" not in result.stderr
