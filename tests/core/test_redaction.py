"""``redact_credentials`` and the logging side of it, on hand-written texts."""

from __future__ import annotations

import logging

import pytest

from driftgate.core.errors import DriftgateError
from driftgate.core.redaction import (
    RedactingFilter,
    install_redacting_record_factory,
    redact_credentials,
)

SECRET = "Pw-s3cr3t-4f9e"


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("http://alice:§@mlflow:5000/api", "http://***@mlflow:5000/api"),
        ("postgresql://u@h/db?password=§", "postgresql://***@h/db?password=***"),
        ("postgresql://h/db?sslmode=require&sslpassword=§&x=1", "postgresql://h/db?sslmode=require&sslpassword=***&x=1"),
        ("https://h/p?token=§#top", "https://h/p?token=***#top"),
        ("https://h/?access_token=§&api_key=§&apikey=§&secret=§", "https://h/?access_token=***&api_key=***&apikey=***&secret=***"),
        ("https://b.s3/k?X-Amz-Signature=§&X-Amz-Credential=§", "https://b.s3/k?X-Amz-Signature=***&X-Amz-Credential=***"),
        ("host=db password=§ dbname=x", "host=db password=*** dbname=x"),
        ("Authorization: Bearer §", "Authorization: Bearer ***"),
        ("{'Authorization': 'Basic §'}", "{'Authorization': 'Basic ***'}"),
        ("retrying with bearer §.§-§", "retrying with bearer ***"),
        # Already masked by SQLAlchemy: left as it is.
        ("postgresql://u:***@h/db", "postgresql://u:***@h/db"),
    ],
)  # fmt: skip
def test_each_shape_of_credential_is_masked(text, masked):
    text, masked = text.replace("§", SECRET), masked.replace("§", SECRET)
    assert redact_credentials(text) == masked
    assert redact_credentials(masked) == masked  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "sqlite:////tmp/a@b/x.db",
        "window=7d threshold=0.1 monkey=2 keyword=3",
        "https://h/search?q=password&page=2",
        "a tokenizer for the passwordless design",
    ],
)
def test_text_without_credentials_is_unchanged(text):
    assert redact_credentials(text) == text


def test_a_driftgate_error_never_holds_a_credential():
    error = DriftgateError(f"cannot open postgresql://u@h/db?password={SECRET}")
    assert SECRET not in str(error) and "password=***" in str(error)


def test_log_records_are_masked_by_the_filter_and_the_record_factory(caplog):
    record = logging.LogRecord(
        "sqlalchemy", logging.INFO, __file__, 1, "connect %s", (f"http://u:{SECRET}@h",), None
    )
    RedactingFilter().filter(record)
    assert record.getMessage() == "connect http://***@h"

    before = logging.getLogRecordFactory()
    try:
        install_redacting_record_factory()
        installed = logging.getLogRecordFactory()
        assert installed.redacts_credentials
        install_redacting_record_factory()  # idempotent: never a wrapper of a wrapper
        assert logging.getLogRecordFactory() is installed
        # A logger with its own handler and propagate=False (as MLflow's and Prefect's).
        logger = logging.getLogger("test.own-handler")
        caplog.set_level(logging.INFO)
        try:
            raise RuntimeError(f"failed at https://h/?token={SECRET}")
        except RuntimeError:
            logger.exception("request to %s", f"postgresql://u:{SECRET}@h/db")
        assert "postgresql://***@h/db" in caplog.text
        assert "token=***" in caplog.text
        assert SECRET not in caplog.text
    finally:
        logging.setLogRecordFactory(before)
