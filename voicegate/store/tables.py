"""The tables every SQL backend creates, in each dialect's column types, and their version."""

from __future__ import annotations

from voicegate.errors import ConfigError

# 2: receipt heads and the roster; a database of version 1 is upgraded on open
SCHEMA_VERSION = 2


def create_statements(*, serial: str, real: str, blob: str, sorted_text: str) -> list[str]:
    """The ``CREATE`` statements, in one dialect's column types, ending with the version row.

    ``ord`` columns keep insertion order, so "oldest first" is stable for equal timestamps.
    ``sorted_text`` is a text type that sorts by code point, as Python's ``sorted`` does.
    """
    return [
        "CREATE TABLE IF NOT EXISTS vg_schema (version INTEGER NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS vg_pending (
            ord {serial}, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
            status TEXT NOT NULL, created_at {real} NOT NULL, version BIGINT NOT NULL,
            data TEXT NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS vg_pending_user ON vg_pending (user_id, created_at)",
        "CREATE INDEX IF NOT EXISTS vg_pending_status ON vg_pending (status)",
        f"""CREATE TABLE IF NOT EXISTS vg_ledger (
            key TEXT PRIMARY KEY, expires_at {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS vg_ledger_expires ON vg_ledger (expires_at)",
        f"""CREATE TABLE IF NOT EXISTS vg_devices (
            ord {serial}, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL, kind TEXT NOT NULL,
            public_key TEXT NOT NULL, algorithm TEXT NOT NULL, created_at {real} NOT NULL,
            name TEXT NOT NULL, revoked_at {real})""",
        "CREATE INDEX IF NOT EXISTS vg_devices_user ON vg_devices (user_id, created_at)",
        f"""CREATE TABLE IF NOT EXISTS vg_pairings (
            code_hash TEXT PRIMARY KEY, user_id TEXT NOT NULL, kind TEXT NOT NULL,
            expires_at {real} NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS vg_budgets (
            key TEXT PRIMARY KEY, window_start {real} NOT NULL, n BIGINT NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS vg_fingerprints (
            ord {serial}, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
            created_at {real} NOT NULL, data {blob} NOT NULL)""",
        # since() runs on every voice upload; prune() scans by age alone
        "CREATE INDEX IF NOT EXISTS vg_fingerprints_user ON vg_fingerprints (user_id, created_at)",
        "CREATE INDEX IF NOT EXISTS vg_fingerprints_created ON vg_fingerprints (created_at)",
        # Personal answers: features only, never audio (docs/security.md). Created on open, so a
        # database of this schema version gains them without an upgrade step.
        f"""CREATE TABLE IF NOT EXISTS vg_templates (
            ord {serial}, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL, meaning TEXT NOT NULL,
            label TEXT NOT NULL, created_at {real} NOT NULL, device_id TEXT NOT NULL,
            data {blob} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS vg_templates_user ON vg_templates (user_id, created_at)",
        """CREATE TABLE IF NOT EXISTS vg_voice_flags (
            user_id TEXT PRIMARY KEY, hard INTEGER NOT NULL)""",
        # Passkeys: public keys and counters only. Created on open, as the templates are.
        f"""CREATE TABLE IF NOT EXISTS vg_passkeys (
            ord {serial}, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
            credential_id {blob} NOT NULL, public_key {blob} NOT NULL, sign_count BIGINT NOT NULL,
            created_at {real} NOT NULL, device_id TEXT NOT NULL, name TEXT NOT NULL,
            last_used_at {real})""",
        "CREATE INDEX IF NOT EXISTS vg_passkeys_user ON vg_passkeys (user_id, created_at)",
        # Web Push subscriptions, one per device; created on open like the templates.
        f"""CREATE TABLE IF NOT EXISTS vg_push (
            ord {serial}, device_id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
            endpoint TEXT NOT NULL, p256dh TEXT NOT NULL, auth TEXT NOT NULL,
            created_at {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS vg_push_user ON vg_push (user_id, created_at)",
        # Grants; created on open like the templates. ``fixed`` is the JSON of the fixed
        # arguments, ``free`` that of the names that may vary.
        f"""CREATE TABLE IF NOT EXISTS vg_grants (
            ord {serial}, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL, upstream TEXT NOT NULL,
            tool TEXT NOT NULL, fixed TEXT NOT NULL, fixed_hash TEXT NOT NULL, free TEXT NOT NULL,
            created_at {real} NOT NULL, expires_at {real} NOT NULL, max_uses BIGINT NOT NULL,
            uses_left BIGINT NOT NULL, device_id TEXT NOT NULL, pending_id TEXT NOT NULL,
            receipt_id TEXT NOT NULL, ended_at {real})""",
        "CREATE INDEX IF NOT EXISTS vg_grants_user ON vg_grants (user_id, created_at)",
        "CREATE INDEX IF NOT EXISTS vg_grants_device ON vg_grants (device_id)",
        f"""CREATE TABLE IF NOT EXISTS vg_receipts (
            id TEXT PRIMARY KEY, user_id {sorted_text} NOT NULL, seq BIGINT NOT NULL,
            digest TEXT NOT NULL, data TEXT NOT NULL, UNIQUE (user_id, seq))""",
        f"""CREATE TABLE IF NOT EXISTS vg_receipt_heads (
            user_id {sorted_text} PRIMARY KEY, seq BIGINT NOT NULL, digest TEXT NOT NULL,
            key_id TEXT NOT NULL, signature TEXT NOT NULL)""",
        """CREATE TABLE IF NOT EXISTS vg_receipt_roster (
            id INTEGER PRIMARY KEY CHECK (id = 1), users BIGINT NOT NULL,
            adopted BIGINT NOT NULL, key_id TEXT NOT NULL, signature TEXT NOT NULL)""",
        # Receipts written by version 1 have no heads: mark the roster LEGACY (-1) so that the
        # first signed write builds heads from the chains as they are (ReceiptStore.adopt).
        """INSERT INTO vg_receipt_roster (id, users, adopted, key_id, signature)
            SELECT 1, -1, 0, '', '' WHERE EXISTS (SELECT 1 FROM vg_receipts)
            AND EXISTS (SELECT 1 FROM vg_schema WHERE version < 2)
            AND NOT EXISTS (SELECT 1 FROM vg_receipt_roster)""",
        f"""INSERT INTO vg_schema (version) SELECT {SCHEMA_VERSION}
            WHERE NOT EXISTS (SELECT 1 FROM vg_schema)""",
        f"UPDATE vg_schema SET version = {SCHEMA_VERSION} WHERE version < {SCHEMA_VERSION}",
    ]


VERSION_QUERY = "SELECT MAX(version) FROM vg_schema"


def check_version(found: object) -> None:
    """Refuse a database whose schema is newer than this code understands."""
    if not isinstance(found, int) or found > SCHEMA_VERSION:
        raise ConfigError(f"store schema version {found!r}; this voicegate knows {SCHEMA_VERSION}")
