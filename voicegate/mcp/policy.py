"""Which upstream tools are reads, writes or high-risk writes, and how each write is approved.

Pure: values in, values out. The operator's globs decide; an upstream's ``readOnlyHint`` is an
untrusted claim, honoured only when the operator did not ask for ``strict``. Anything the rules
do not call a read is a write, so a tool nobody thought about waits for the user. A value refused
is a ``ConfigFieldError`` naming the field it is for (``modes``, ``steps``, an upstream's ``env``
or ``headers``); the command line says it as its flag.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase

from voicegate.domain import HighRiskStep, Risk
from voicegate.errors import ConfigError, ConfigFieldError
from voicegate.gate.grant_rules import GrantRules

# The gate's own agent-facing tools; an upstream tool of the same name would be shadowed.
OWN_TOOLS = frozenset({"pending_status", "withdraw", "list_pending", "choose_one"})


class Mode(StrEnum):
    """How a write gets its yes."""

    DEVICE = "device"  # a pending card on the user's paired device (the default)
    TOKEN = "token"  # the in-chat two-phase token
    REJECT = "reject"  # the operator disabled the tool
    DELEGATE = "delegate"  # run at once; the client's own dialog is trusted


@dataclass(frozen=True, slots=True)
class Classification:
    """What the gate does with one tool."""

    tool: str
    write: bool
    risk: Risk
    mode: Mode


@dataclass(frozen=True, slots=True)
class Policy:
    """The operator's rules: globs for reads, writes and high-risk writes, modes per glob, the
    second step of a high-risk card per glob, and the bounds on grants.

    The step defaults to another yes (``HighRiskStep.YES``): a passkey needs one registered
    first and a page served at a domain name (or localhost), so asking for it everywhere by
    default would refuse every high-risk write of a user or a server that has neither.
    """

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    high_risk: tuple[str, ...] = ()
    modes: tuple[tuple[str, Mode], ...] = ()
    strict: bool = False
    default_mode: Mode = Mode.DEVICE
    steps: tuple[tuple[str, HighRiskStep], ...] = ()
    default_step: HighRiskStep = HighRiskStep.YES
    grants: GrantRules = field(default_factory=GrantRules)

    def classify(self, tool: str, *, read_only_hint: bool | None = None) -> Classification:
        """Classify ``tool``; ``read_only_hint`` is what the upstream claims about it."""
        high = _matches(tool, self.high_risk)
        if high or _matches(tool, self.writes):
            write = True
        elif _matches(tool, self.reads):
            write = False
        else:
            # An upstream's own claim counts only when the operator trusts that server.
            write = not (read_only_hint is True and not self.strict)
        return Classification(
            tool=tool,
            write=write,
            risk=Risk.HIGH if high else Risk.LOW,
            mode=self.mode_for(tool),
        )

    def mode_for(self, tool: str) -> Mode:
        """The approval mode of ``tool``: the last matching ``--mode`` glob wins."""
        mode = self.default_mode
        for pattern, chosen in self.modes:
            if fnmatchcase(tool, pattern):
                mode = chosen
        return mode

    def step_for(self, tool: str) -> HighRiskStep:
        """What a high-risk card of ``tool`` asks after its choice: the last matching
        ``--high-risk-step`` glob wins."""
        step = self.default_step
        for pattern, chosen in self.steps:
            if fnmatchcase(tool, pattern):
                step = chosen
        return step


def grants_line(rules: GrantRules) -> str:
    """The operator's bounds on grants, in one line (said at start when not the defaults)."""
    if not rules.on:
        return "grants: off (--grant-max or --grant-max-uses is 0)"
    line = f"grants: at most {rules.max_minutes} minutes and {rules.max_uses} uses"
    if rules.free:
        line += "; may vary: " + ", ".join(f"{g} ({', '.join(n)})" for g, n in rules.free)
    if rules.off:
        line += "; never for: " + ", ".join(rules.off)
    return line


def _matches(tool: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(tool, p) for p in patterns)


def split_globs(values: Sequence[str] | None) -> tuple[str, ...]:
    """``["a_*,b", "c"]`` -> ``("a_*", "b", "c")``: each flag may hold a comma-separated list."""
    out: list[str] = []
    for value in values or ():
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return tuple(out)


def parse_modes(values: Sequence[str] | None) -> tuple[tuple[str, Mode], ...]:
    """Parse ``GLOB=MODE`` pairs for ``Policy.modes``; a pair without ``=`` or with an unknown
    mode is a ``ConfigFieldError`` naming ``modes``."""
    out: list[tuple[str, Mode]] = []
    for value in values or ():
        pattern, sep, name = value.rpartition("=")
        if not sep or not pattern:
            raise ConfigFieldError("{modes} needs GLOB=MODE, got {value!r}", value=value)
        try:
            out.append((pattern, Mode(name.strip())))
        except ValueError:
            raise ConfigFieldError(
                "{modes} {value!r}: mode must be one of {choices}",
                value=value,
                choices=", ".join(m.value for m in Mode),
            ) from None
    return tuple(out)


def parse_steps(values: Sequence[str] | None) -> tuple[tuple[str, HighRiskStep], ...]:
    """Parse ``GLOB=STEP`` pairs for ``Policy.steps`` (``--high-risk-step``); a pair without ``=``
    or with an unknown step is a ``ConfigFieldError`` naming ``steps``."""
    out: list[tuple[str, HighRiskStep]] = []
    for value in values or ():
        pattern, sep, name = value.rpartition("=")
        if not sep or not pattern:
            raise ConfigFieldError("{steps} needs GLOB=STEP, got {value!r}", value=value)
        try:
            out.append((pattern, HighRiskStep(name.strip())))
        except ValueError:
            raise ConfigFieldError(
                "{steps} {value!r}: step must be one of {choices}",
                value=value,
                choices=", ".join(s.value for s in HighRiskStep),
            ) from None
    return tuple(out)


def parse_pairs(values: Sequence[str] | None, field: str) -> dict[str, str]:
    """Parse ``KEY=VALUE`` pairs for ``field`` of an ``UpstreamSpec`` (``env``, ``headers``); a
    missing ``=`` is a ``ConfigFieldError`` naming ``field``."""
    out: dict[str, str] = {}
    for value in values or ():
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise ConfigFieldError("{" + field + "} needs KEY=VALUE, got {value!r}", value=value)
        out[key] = val
    return out


def check_collisions(upstream_tools: Iterable[str], own: Iterable[str] = OWN_TOOLS) -> None:
    """Refuse an upstream whose tool names collide with the gate's own tools."""
    clash = sorted(set(upstream_tools) & set(own))
    if clash:
        raise ConfigError(
            "the upstream offers tools named "
            + ", ".join(clash)
            + ", which voicegate itself provides; refusing to start rather than hide one of them"
        )


def classify_all(policy: Policy, hints: Mapping[str, bool | None]) -> dict[str, Classification]:
    """Classify every tool in ``hints`` (tool name -> its upstream ``readOnlyHint``)."""
    return {name: policy.classify(name, read_only_hint=hint) for name, hint in hints.items()}


def read_reasons(policy: Policy, hints: Mapping[str, bool | None]) -> dict[str, str]:
    """Each tool of ``hints`` that passes straight through as a read, and why: ``--reads`` (the
    operator named it) or ``readOnlyHint`` (the upstream's own claim, believed without
    ``strict``)."""
    reasons = {}
    for tool, hint in sorted(hints.items()):
        if policy.classify(tool, read_only_hint=hint).write:
            continue
        reasons[tool] = "--reads" if _matches(tool, policy.reads) else "readOnlyHint"
    return reasons


def reads_line(policy: Policy, hints: Mapping[str, bool | None]) -> str:
    """One line for the operator: which upstream tools run without a yes, and why."""
    reasons = read_reasons(policy, hints)
    if not reasons:
        return "reads passed straight through: none; every upstream tool waits for a yes"
    named = ", ".join(f"{tool} ({why})" for tool, why in reasons.items())
    line = f"reads passed straight through without a yes: {named}"
    if "readOnlyHint" in reasons.values():
        line += "; readOnlyHint is the upstream's own claim, which --strict ignores"
    return line


def policy_lines(policy: Policy, tools: Mapping[str, bool]) -> list[tuple[bool, str]]:
    """What the operator should see at start beside ``reads_line``: which listed tools need two
    yeses, the upstream's ``destructiveHint`` claims that ``--high-risk`` does not name (a claim
    alone never changes a tool's risk), and every glob that matches no listed tool, since a typo
    in ``--high-risk`` would quietly leave a tool at one yes. ``tools`` maps each listed tool to
    whether the upstream marks it ``destructiveHint: true``. Each line comes with whether it is
    a warning."""
    names = sorted(tools)
    high = [t for t in names if _matches(t, policy.high_risk)]
    lines = [(False, f"high-risk writes (a second yes): {', '.join(high) if high else 'none'}")]
    keyed = [
        f"{t} ({policy.step_for(t)})" for t in high if policy.step_for(t) is not HighRiskStep.YES
    ]
    if keyed:
        lines.append(
            (False, f"high-risk writes whose second step needs a passkey: {', '.join(keyed)}")
        )
    unnamed = [t for t in names if tools[t] and t not in high]
    if unnamed:
        lines.append(
            (
                True,
                "marked destructiveHint by the upstream, not named by --high-risk (one yes): "
                + ", ".join(unnamed),
            )
        )
    if policy.grants != GrantRules():
        lines.append((False, grants_line(policy.grants)))
    flags = (
        ("--reads", policy.reads),
        ("--writes", policy.writes),
        ("--high-risk", policy.high_risk),
        ("--mode", tuple(glob for glob, _ in policy.modes)),
        ("--high-risk-step", tuple(glob for glob, _ in policy.steps)),
        ("--grant-free", tuple(glob for glob, _ in policy.grants.free)),
        ("--no-grants", policy.grants.off),
    )
    unmatched = [
        f"{flag} {glob!r}"
        for flag, globs in flags
        for glob in globs
        if not any(fnmatchcase(t, glob) for t in names)
    ]
    if unmatched:
        lines.append((True, f"globs that match no listed tool: {', '.join(unmatched)}"))
    return lines
