"""The operator's bounds on grants: how long and how often, which arguments may vary, which tools
never get one (``serve --grant-max``, ``--grant-max-uses``, ``--grant-free``, ``--no-grants``).

Values only: the gate's rooms read these, and this module reads none of them. A value refused is
a ``ConfigFieldError`` naming the field of ``GrantRules`` it is for; the command line says it as
its flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from voicegate.errors import ConfigFieldError

__all__ = [
    "DEFAULT_MAX_MINUTES",
    "DEFAULT_MAX_USES",
    "DEFAULT_USES",
    "MOST_MINUTES",
    "MOST_USES",
    "GrantRules",
    "parse_free",
]

# The offer the page makes, "allow the same for 10 minutes", is also the longest a grant may
# run unless the operator says otherwise: long enough for a burst of the same work while the
# user is still about, short enough that a yes to one card does not become standing leave.
DEFAULT_MAX_MINUTES = 10
# A burst, not a stream: past ten repeats the user is asked again.
DEFAULT_MAX_USES = 10
# The count the page preselects beside its 10 minutes, and the one a spoken grant ("yes, for ten
# minutes") has where the device names none: within the operator's bound, as the page's choice is.
DEFAULT_USES = 5
# The most an operator may allow at all: a day, and a thousand repeats. Past that a grant is no
# longer a repeat of one moment's yes but a standing permission, which is a policy (``--mode``).
MOST_MINUTES = 1440
MOST_USES = 1000


@dataclass(frozen=True, slots=True)
class GrantRules:
    """The operator's bounds on grants (``serve --grant-max``, ``--grant-max-uses``,
    ``--grant-free``, ``--no-grants``)."""

    max_minutes: int = DEFAULT_MAX_MINUTES
    max_uses: int = DEFAULT_MAX_USES
    # (tool glob, argument names that may vary under a grant); every match adds its names.
    free: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Tool globs no grant is ever made for.
    off: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.max_minutes <= MOST_MINUTES:
            raise ConfigFieldError(
                "{max_minutes} is 0 to {most} minutes (0: no grants), not {value}",
                most=MOST_MINUTES,
                value=self.max_minutes,
            )
        if not 0 <= self.max_uses <= MOST_USES:
            raise ConfigFieldError(
                "{max_uses} is 0 to {most} (0: no grants), not {value}",
                most=MOST_USES,
                value=self.max_uses,
            )

    @property
    def on(self) -> bool:
        """Whether any grant may be made at all (neither bound is 0)."""
        return self.max_minutes > 0 and self.max_uses > 0

    def allows(self, tool: str) -> bool:
        """Whether grants may be made (and spent) for ``tool`` at all."""
        return self.on and not any(fnmatchcase(tool, glob) for glob in self.off)

    def spoken_uses(self) -> int:
        """The count of a spoken grant whose device named none: ``DEFAULT_USES`` or the
        operator's bound, whichever is less, as the page preselects it."""
        return min(DEFAULT_USES, self.max_uses)

    def free_for(self, tool: str) -> tuple[str, ...]:
        """The argument names of ``tool`` that may vary under a grant, sorted."""
        names = {n for glob, named in self.free if fnmatchcase(tool, glob) for n in named}
        return tuple(sorted(names))


def parse_free(values: Sequence[str] | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Parse ``TOOLGLOB=arg,arg`` pairs for ``GrantRules.free`` (``--grant-free``); a pair without
    ``=`` or names is a ``ConfigFieldError`` naming ``free``."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for value in values or ():
        pattern, sep, names = value.partition("=")
        named = tuple(n.strip() for n in names.split(",") if n.strip())
        if not sep or not pattern.strip() or not named:
            raise ConfigFieldError("{free} needs TOOLGLOB=ARG[,ARG...], got {value!r}", value=value)
        out.append((pattern.strip(), named))
    return tuple(out)
