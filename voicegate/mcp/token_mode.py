"""The in-chat two-phase confirmation for tools the operator put in ``token`` mode.

The first call returns ``requires_confirmation``: the card text, the arguments, a safety word
and a signed token bound to the user, tool, target and canonical argument hash. The re-call
with the same arguments and the token runs the write once: the codec checks the token, the
gate claims it and spends its ``jti`` in the ledger, runs it and leaves a receipt. Each refusal
names its ``Reason``; ``ledger_unavailable`` only ever means nothing ran, and a store that fails
after the write ran answers ``outcome_unrecorded`` while the gate writes the receipt later.
Weaker than the device (the agent holds the token), so it is an operator's choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from voicegate.canonical import args_hash
from voicegate.domain import Check, Receipt, Risk
from voicegate.errors import Refused, StoreUnavailable, TokenRefused
from voicegate.gate import card
from voicegate.gate.core import ActionRequest, Gate
from voicegate.reasons import Reason
from voicegate.tokens import TokenCodec

TOKEN_ARG = "confirmationToken"

INSTRUCTION = (
    "Show this summary and these arguments to the user and ask for an explicit yes. Only after "
    "the user says yes, call the same tool again with exactly the same arguments plus "
    f"{TOKEN_ARG}. The token works once and expires."
)


def split_token(arguments: Mapping[str, Any]) -> tuple[dict[str, Any], bool, Any]:
    """``(arguments without the token, whether a token key was sent, the token value)``."""
    rest = {k: v for k, v in arguments.items() if k != TOKEN_ARG}
    return rest, TOKEN_ARG in arguments, arguments.get(TOKEN_ARG)


def plan_hash(tool: str, arguments: Mapping[str, Any]) -> str:
    """The canonical hash a token binds: the tool with its exact arguments."""
    return args_hash({"tool": tool, "arguments": dict(arguments)})


def preview(
    codec: TokenCodec,
    *,
    user: str,
    tenant: str,
    tool: str,
    arguments: Mapping[str, Any],
    risk: Risk,
    target: str = "",
) -> dict[str, Any]:
    """Phase one: the ``requires_confirmation`` answer with a fresh token."""
    token = codec.mint(
        subject=user,
        tenant=tenant,
        tool=tool,
        target=target,
        args_hash=plan_hash(tool, arguments),
    )
    return {
        "status": "requires_confirmation",
        "tool": tool,
        "summary": card.render(tool, arguments),
        "args": dict(arguments),
        "safety": "destructive" if risk is Risk.HIGH else "write",
        TOKEN_ARG: token,
        "expiresInSeconds": int(codec.ttl),
        "instruction": INSTRUCTION,
    }


async def redeem(
    codec: TokenCodec,
    gate: Gate,
    *,
    user: str,
    tenant: str,
    tool: str,
    arguments: Mapping[str, Any],
    token: Any,
    risk: Risk,
    target: str = "",
) -> Receipt:
    """Phase two: verify, spend the ``jti`` once, run and seal a receipt; else ``Refused``.

    The receipt carries the tool's ``risk`` and, as the time the action was proposed, the
    moment the token was issued.
    """
    claims = codec.verify(
        token if isinstance(token, str | bytes) or token is None else str(token),
        subject=user,
        tenant=tenant,
        tool=tool,
        target=target,
        args_hash=plan_hash(tool, arguments),
    )
    checks = (
        Check("token_signature", True),
        Check("token_fresh", True),
        Check("token_bound_to_user_tool_plan", True),
    )
    try:
        return await gate.run_confirmed(
            user,
            ActionRequest(tool=tool, arguments=dict(arguments), target=target),
            mode="token",
            spend_key="token:" + claims.jti,
            spend_until=claims.expires_at + 60.0,
            checks=checks,
            risk=risk,
            proposed_at=claims.issued_at,
        )
    except StoreUnavailable as exc:
        # The gate raises this only before the upstream was called.
        raise TokenRefused(Reason.LEDGER_UNAVAILABLE) from exc
    except Refused as exc:
        if exc.reason is Reason.ALREADY_USED:
            raise TokenRefused(Reason.ALREADY_USED) from exc
        raise
