"""A command that cannot reach the database, the broker or the bucket says so in one line,
naming the setting, without the password; exit code 1, no traceback."""

from __future__ import annotations

import pytest

from tests.cli.conftest import UNREACHABLE, uocr
from uocr_cli.errors import reason, redact

DATABASE = (
    "error: cannot reach the database at postgresql+psycopg://uocr:***@127.0.0.1:1/uocr "
    "(UOCR_DATABASE__URL): connection refused"
)
BROKER = (
    "error: cannot reach the broker at redis://:***@127.0.0.1:2/0 (UOCR_REDIS__URL): "
    "connection refused"
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("db", "upgrade"), DATABASE),
        (("keys", "create", "--tenant", "acme"), DATABASE),
        (("keys", "list"), DATABASE),
        (("keys", "revoke", "uocr_abcdefgh"), DATABASE),
        (("webhooks", "failed"), DATABASE),
        (("webhooks", "resend", "--all-failed"), BROKER),
        (("api",), DATABASE),
        (("worker",), BROKER),
        (("beat",), BROKER),
        (("flower", "--unauthenticated"), BROKER),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else "",
)
def test_an_unreachable_service_is_one_line(args: tuple[str, ...], message: str) -> None:
    done = uocr(*args, env=UNREACHABLE)
    assert (done.returncode, done.stderr.strip().splitlines()) == (1, [message])
    assert "s3cret-pw" not in done.stderr + done.stdout


def test_an_unreachable_bucket_is_one_line() -> None:
    done = uocr("storage", "init", env=UNREACHABLE)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(
        "error: cannot reach the object store at http://127.0.0.1:3 (UOCR_S3__ENDPOINT_URL): "
    )


def test_a_misspelled_variable_stops_any_command_naming_it() -> None:
    done = uocr("keys", "list", env={**UNREACHABLE, "UOCR_PAGE_GROUPSIZE": "4"})
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        1,
        [
            "error: unknown setting UOCR_PAGE_GROUPSIZE in the environment; "
            "did you mean UOCR_PAGE_GROUP_SIZE?"
        ],
    )


def test_a_malformed_config_file_stops_any_command_naming_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "uocr.toml"
    config.write_text("[s3\nbucket = 1\n")
    done = uocr("keys", "list", env={"UOCR_CONFIG_FILE": str(config)})
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: config file {config} (UOCR_CONFIG_FILE) is not valid TOML: ")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+psycopg://u:p%40ss@db:5432/uocr", "postgresql+psycopg://u:***@db:5432/uocr"),
        ("redis://:pw@redis:6379/0", "redis://:***@redis:6379/0"),
        ("redis://redis:6379/0", "redis://redis:6379/0"),
    ],
)
def test_passwords_are_never_shown(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_a_drivers_message_is_cut_to_its_reason() -> None:
    psycopg = (
        'connection failed: connection to server at "127.0.0.1", port 1 failed: '
        "Connection refused\n\tIs the server running on that host?"
    )
    assert reason(RuntimeError(psycopg)) == "connection refused"
    redis = "Error 111 connecting to 127.0.0.1:2. Connection refused."
    assert reason(ConnectionError(redis)) == "connection refused"
