"""Exceptions raised by voicegate.

VoicegateError                 every error voicegate raises on purpose
├── Refused(reason)            a check failed; carries a closed ``Reason``
│   ├── TokenRefused           a two-phase token was refused
│   ├── AudioRefused           uploaded audio was refused before transcription
│   ├── DeviceRefused          a device request was refused
│   └── Throttled              busy or rate limited; carries ``retry_after`` seconds
├── StoreUnavailable           the store could not be reached; always fails closed
├── ConfigError                the server was asked to start in an unsafe way
│   ├── ConfigFieldError       a value refused for a field of the configuration
│   ├── MissingExtra(extra)    a command needs an optional extra that is not installed
│   └── MissingLab(command)    a command of the lab (eval, bench), which the wheel does not ship
└── ModelError                 a recogniser model is missing or does not verify
"""

from __future__ import annotations

import string
from collections.abc import Mapping

from voicegate.reasons import NEXT_STEP, Reason


class VoicegateError(Exception):
    """Base class of every error voicegate raises on purpose."""


class Refused(VoicegateError):
    """A named check failed; ``reason`` says which, ``next_step`` what to do about it."""

    def __init__(self, reason: Reason, detail: str = "", *, pending_id: str | None = None) -> None:
        self.reason = reason
        self.detail = detail
        # The set the caller can ask about, where there is one (a write that ran unrecorded).
        self.pending_id = pending_id
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)

    @property
    def next_step(self) -> str:
        return NEXT_STEP.get(self.reason, "")


class TokenRefused(Refused):
    """A two-phase confirmation token was refused."""


class AudioRefused(Refused):
    """Uploaded audio was refused before it reached the recogniser."""


class DeviceRefused(Refused):
    """A request from a device was refused."""


class Throttled(Refused):
    """Refused for load (``BUSY`` or ``RATE_LIMITED``); the caller may retry after a while."""

    def __init__(self, reason: Reason, retry_after: int, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.retry_after = max(1, retry_after)


class StoreUnavailable(VoicegateError):
    """The store is unreachable; callers refuse with ``Reason.LEDGER_UNAVAILABLE``."""


class NoStore(StoreUnavailable):
    """Opened without ``create``, the file, database or schema named holds no voicegate store."""


class ConfigError(VoicegateError):
    """The configuration is unsafe or incomplete."""


class ConfigFieldError(ConfigError):
    """A value refused for a field of the configuration, named as a field: of ``ServerConfig``,
    of the operator's tool ``Policy`` and its ``GrantRules``, or of an ``UpstreamSpec``.

    ``template`` names each field in braces, ``{token_ttl}`` (``{rate_limits:bare}`` where a
    front end's name is read without its leading dashes), and the refused values by the names
    given in ``values``. The message calls each field by its own name; ``said`` calls them as a
    front end knows them, so the command line reports its flags and the configuration knows
    none.
    """

    def __init__(self, template: str, **values: object) -> None:
        self.template = template
        self.values = values
        super().__init__(self.said({}))

    @property
    def fields(self) -> frozenset[str]:
        """The names of the fields the message names (what a caller branches on)."""
        parsed = string.Formatter().parse(self.template)
        return frozenset(name for _, name, _, _ in parsed if name and name not in self.values)

    def said(self, names: Mapping[str, str]) -> str:
        """The message, each field called by its name in ``names``, else by its own."""
        return self.template.format_map(_Naming(names, self.values))


class _Name(str):
    """A field's name in a message; ``:bare`` drops a flag's leading dashes."""

    __slots__ = ()

    def __format__(self, spec: str) -> str:
        return self.lstrip("-") if spec == "bare" else str(self)


class _Naming(dict[str, object]):
    """The values of a ``ConfigFieldError``; any other key is a field, called as ``names`` says."""

    def __init__(self, names: Mapping[str, str], values: Mapping[str, object]) -> None:
        super().__init__(values)
        self.names = names

    def __missing__(self, field: str) -> _Name:
        return _Name(self.names.get(field, field))


# The name the package is installed by: PyPI's ``voicegate`` is another project. The import
# package and the command stay ``voicegate``.
DISTRIBUTION = "voicegate-mcp"


class MissingExtra(ConfigError):
    """What was asked needs an optional extra (``[postgres]``, ``[hindi]``) not installed here."""

    def __init__(self, needs: str, extra: str) -> None:
        self.extra = extra
        super().__init__(f"{needs} needs the {extra} extra: pip install '{DISTRIBUTION}[{extra}]'")


# The evaluation kit and the benchmarks: ``lab/`` of a source checkout, never in the wheel.
LAB_DISTRIBUTION = "voicegate-mcp-lab"


class MissingLab(ConfigError):
    """``voicegate eval`` or ``bench`` was asked for where the lab is not installed."""

    def __init__(self, command: str) -> None:
        self.command = command
        super().__init__(
            f"voicegate {command} needs {LAB_DISTRIBUTION}, which comes with the source, "
            "not the wheel: in a checkout, pip install -e lab"
        )


class HearingUnavailable(VoicegateError):
    """No recogniser worker heard an utterance in time (``serve --hearing``): the answer is
    refused, never guessed."""


class ModelError(VoicegateError):
    """A recogniser model is missing, incomplete or fails its checksum."""
