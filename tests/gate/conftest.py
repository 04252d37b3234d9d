"""The gate tests reuse the store tests' throw-away PostgreSQL schemas."""

from tests.store.conftest import pg_schema

__all__ = ["pg_schema"]
