"""The closed vocabulary of refusal reasons and decisions.

Every refusal anywhere in voicegate (token checks, audio intake, the consent grammar, the gate,
the device API) carries one ``Reason``. The agent, the approval page and the tests branch on
these codes, never on message text. ``NEXT_STEP`` says what the caller can do about each.
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """What a user's answer means for a pending set."""

    CHOOSE = "choose"
    CONFIRM = "confirm"
    CANCEL = "cancel"
    MORE_TIME = "more_time"
    REFUSE = "refuse"


class Reason(StrEnum):
    """Why something was not released. Grouped by the step that refuses."""

    # two-phase tokens
    MISSING = "missing"
    MALFORMED = "malformed"
    BAD_SIGNATURE = "bad_signature"
    EXPIRED = "expired"
    WRONG_USER = "wrong_user"
    WRONG_TOOL = "wrong_tool"
    PLAN_CHANGED = "plan_changed"
    ALREADY_USED = "already_used"
    LEDGER_UNAVAILABLE = "ledger_unavailable"
    # audio intake
    UNSUPPORTED_FORMAT = "unsupported_format"
    CORRUPT = "corrupt"
    TOO_LARGE = "too_large"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    SILENT = "silent"
    CLIPPED = "clipped"
    TOO_NOISY = "too_noisy"
    AUDIO_REUSED = "audio_reused"
    # recogniser and consent grammar
    NO_SPEECH = "no_speech"
    UNCLEAR = "unclear"
    NOT_UNDERSTOOD = "not_understood"
    HEDGE = "hedge"
    QUESTION = "question"
    NEGATION = "negation"
    CONTRADICTION = "contradiction"
    SOUND_ALIKE = "sound_alike"
    OUT_OF_RANGE = "out_of_range"
    NUMBER_ON_FINAL = "number_on_final"
    AMBIGUOUS = "ambiguous"
    LANGUAGE_UNAVAILABLE = "language_unavailable"
    # the gate
    UNKNOWN_PENDING = "unknown_pending"
    NOT_OPEN = "not_open"
    WITHDRAWN = "withdrawn"
    SET_EXPIRED = "set_expired"
    WRONG_STAGE = "wrong_stage"
    WRONG_SET = "wrong_set"
    ACTION_CHANGED = "action_changed"
    NOT_SHOWN_IN_FULL = "not_shown_in_full"
    NOT_A_WRITE = "not_a_write"
    EVIDENCE_REUSED = "evidence_reused"
    EXTENSION_LIMIT = "extension_limit"
    UPSTREAM_FAILED = "upstream_failed"
    OUTCOME_UNRECORDED = "outcome_unrecorded"
    OPERATOR_DISABLED = "operator_disabled"
    UNKNOWN_TOOL = "unknown_tool"
    BAD_ARGUMENTS = "bad_arguments"
    BAD_TOOL_SCHEMA = "bad_tool_schema"
    NOT_ON_DEVICE = "not_on_device"
    ARGUMENTS_TOO_LARGE = "arguments_too_large"
    TOO_MANY_OPEN = "too_many_open"
    PROPOSAL_RATE = "proposal_rate"
    # devices and pairing
    UNSIGNED_REQUEST = "unsigned_request"
    UNKNOWN_DEVICE = "unknown_device"
    DEVICE_REVOKED = "device_revoked"
    WRONG_DEVICE_USER = "wrong_device_user"
    DEVICE_CANNOT_SPEAK = "device_cannot_speak"
    BAD_DEVICE_SIGNATURE = "bad_device_signature"
    STALE_REQUEST = "stale_request"
    REQUEST_REPLAYED = "request_replayed"
    BAD_PAIRING_CODE = "bad_pairing_code"
    PAIRING_BUDGET = "pairing_budget"
    NO_DEVICE = "no_device"
    BAD_REQUEST = "bad_request"
    # notifications
    PUSH_OFF = "push_off"
    # personal answers (enrolment)
    UNKNOWN_TEMPLATE = "unknown_template"
    TEMPLATE_LIMIT = "template_limit"
    TOO_SLOW = "too_slow"
    # passkeys (WebAuthn): registering one, and the high-risk step they answer
    NO_PASSKEY = "no_passkey"
    PASSKEY_REQUIRED = "passkey_required"
    PASSKEY_UNSUPPORTED = "passkey_unsupported"
    PASSKEY_CANCELLED = "passkey_cancelled"
    PASSKEY_WRONG_RP = "passkey_wrong_rp"
    PASSKEY_WRONG_ORIGIN = "passkey_wrong_origin"
    PASSKEY_MISMATCH = "passkey_mismatch"
    PASSKEY_NOT_VERIFIED = "passkey_not_verified"
    PASSKEY_BAD_SIGNATURE = "passkey_bad_signature"
    PASSKEY_COUNTER = "passkey_counter"
    UNKNOWN_PASSKEY = "unknown_passkey"
    PASSKEY_REGISTRATION = "passkey_registration"
    PASSKEY_LIMIT = "passkey_limit"
    # grants: a yes that asks to allow the same again, and ending one
    GRANT_SEVERAL_CARDS = "grant_several_cards"
    GRANT_HIGH_RISK = "grant_high_risk"
    GRANT_OFF = "grant_off"
    GRANT_BEYOND_LIMIT = "grant_beyond_limit"
    GRANT_NO_PAUSE = "grant_no_pause"
    UNKNOWN_GRANT = "unknown_grant"
    # approving several single cards with one answer
    ALL_SEVERAL_CARDS = "all_several_cards"
    ALL_HIGH_RISK = "all_high_risk"
    # load
    RATE_LIMITED = "rate_limited"
    BUSY = "busy"
    HEARING_UNAVAILABLE = "hearing_unavailable"


NEXT_STEP: dict[Reason, str] = {
    Reason.MISSING: "Call the tool without a token first to get a preview and a token.",
    Reason.MALFORMED: "The token was damaged; call the tool without a token for a fresh one.",
    Reason.BAD_SIGNATURE: "The token was not issued by this server; ask for a fresh one.",
    Reason.EXPIRED: "Call the tool again without a token and ask the user again.",
    Reason.WRONG_USER: "This token belongs to someone else; do not retry.",
    Reason.WRONG_TOOL: "This token is for another tool or target; do not retry.",
    Reason.PLAN_CHANGED: "The arguments changed since the user approved; show the new preview.",
    Reason.ALREADY_USED: "The action may already have run; check before asking again.",
    Reason.LEDGER_UNAVAILABLE: "Nothing ran; the approval store is unreachable, retry shortly.",
    Reason.UNSUPPORTED_FORMAT: "Send WAV, FLAC, OGG, WebM/Opus or MP4/AAC audio.",
    Reason.CORRUPT: "The recording could not be read; record again.",
    Reason.TOO_LARGE: "The recording is too large; record a shorter answer.",
    Reason.TOO_SHORT: "The recording is too short; hold the button while you speak.",
    Reason.TOO_LONG: "The recording is too long; say just your answer.",
    Reason.SILENT: "Nothing was heard; speak closer to the microphone.",
    Reason.CLIPPED: "The recording is distorted; speak a little further from the microphone.",
    Reason.TOO_NOISY: "Too much background noise; try again somewhere quieter or tap.",
    Reason.AUDIO_REUSED: "This recording was used before; say your answer again.",
    Reason.NO_SPEECH: "Nothing clear was heard; say your answer again or tap.",
    Reason.UNCLEAR: "Not heard clearly enough to act on; say it again or tap.",
    # Worded for a choice among cards; YES_NO_NEXT_STEP words them for a yes-or-no question.
    Reason.NOT_UNDERSTOOD: "Say the number of a card, 'cancel' or 'more time', or tap.",
    Reason.HEDGE: "Take your time; say the card's number when you are sure, or 'more time'.",
    Reason.QUESTION: "That sounded like a question; say your answer plainly, or 'cancel'.",
    Reason.NEGATION: "Heard a 'no'; nothing ran. Say 'cancel' to cancel, or say your answer again.",
    Reason.CONTRADICTION: "Heard two different answers; say just one.",
    Reason.SOUND_ALIKE: "That word sounds like a number but is not one; say 'number two' or tap.",
    Reason.OUT_OF_RANGE: "There is no card with that number; say one of the numbers shown.",
    Reason.NUMBER_ON_FINAL: "This is the final check; say 'yes' to confirm or 'cancel'.",
    Reason.AMBIGUOUS: "Several cards are open; say which one, for example 'the second one'.",
    Reason.LANGUAGE_UNAVAILABLE: "The recogniser for that language is not installed; tap instead.",
    Reason.UNKNOWN_PENDING: "No such pending action; list the pending actions again.",
    Reason.NOT_OPEN: "This action was already decided; nothing more will run.",
    Reason.WITHDRAWN: "The agent withdrew this action; nothing ran.",
    Reason.SET_EXPIRED: "The time ran out; ask the agent to propose the action again.",
    Reason.WRONG_STAGE: "This answer is not for the current step; look at the card again.",
    Reason.WRONG_SET: "This answer was for another card; look at the card again.",
    Reason.ACTION_CHANGED: "The action changed after it was shown; nothing ran.",
    Reason.NOT_SHOWN_IN_FULL: "Part of this card was hidden; open its full text, read it, "
    "then answer again.",
    Reason.NOT_A_WRITE: "This action is not a registered write; nothing ran.",
    Reason.EVIDENCE_REUSED: "This answer was already used; answer again.",
    Reason.EXTENSION_LIMIT: "No more extensions; decide now or cancel.",
    Reason.UPSTREAM_FAILED: "The server behind the gate failed or could not be reached; nothing "
    "is retried by itself. If this was an approved write, check its status before asking again.",
    Reason.OUTCOME_UNRECORDED: "The action ran once, but the approval store is unreachable, so "
    "its receipt is not written yet; it will be written when the store returns. Do not run it "
    "again; check its status later.",
    Reason.OPERATOR_DISABLED: "The operator disabled this tool; do not retry.",
    Reason.UNKNOWN_TOOL: "No such tool upstream; list the tools again and use one of them.",
    Reason.BAD_ARGUMENTS: "The arguments do not match the tool's input schema (see detail); "
    "nothing was proposed, so fix them and call again.",
    Reason.BAD_TOOL_SCHEMA: "The upstream tool's input schema is not valid, so no call of it "
    "can be checked or proposed; tell the operator.",
    Reason.NOT_ON_DEVICE: "This write is not approved on the user's device (its mode is token "
    "or delegate), so it cannot be an option; call it directly instead.",
    Reason.ARGUMENTS_TOO_LARGE: "The arguments are too long for a person to read on a card; "
    "split the action into smaller ones.",
    Reason.TOO_MANY_OPEN: "The user already has many actions waiting; wait for their answers "
    "or withdraw one before proposing more.",
    Reason.PROPOSAL_RATE: "Too many proposals from this agent; wait a minute and propose only "
    "what the user needs.",
    Reason.UNSIGNED_REQUEST: "The request was not signed; send it from a paired device.",
    Reason.UNKNOWN_DEVICE: "Pair this device again.",
    Reason.DEVICE_REVOKED: "This device was unpaired; pair it again.",
    Reason.WRONG_DEVICE_USER: "This device belongs to another user.",
    Reason.DEVICE_CANNOT_SPEAK: "This device was paired for taps only; tap instead.",
    Reason.BAD_DEVICE_SIGNATURE: "The request signature did not check out; pair again if it "
    "keeps happening.",
    Reason.STALE_REQUEST: "Check the device clock; requests must be within 60 seconds.",
    Reason.REQUEST_REPLAYED: "This request was already received; send a new one.",
    Reason.BAD_PAIRING_CODE: "Check the pairing code and try again.",
    Reason.PAIRING_BUDGET: "Too many pairing attempts; wait a few minutes.",
    Reason.NO_DEVICE: "Ask the user to pair a device: the operator runs `voicegate pair` and "
    "the user enters the code on the approve page. The card waits meanwhile.",
    Reason.BAD_REQUEST: "The request was not understood; check its fields.",
    Reason.PUSH_OFF: "This server sends no notifications; keep the approve page open instead.",
    Reason.UNKNOWN_TEMPLATE: "No such taught answer of yours; list them again.",
    Reason.TEMPLATE_LIMIT: "You have taught the most answers kept; delete some to add more.",
    Reason.TOO_SLOW: "The request did not arrive in time; check the connection and send it again.",
    Reason.NO_PASSKEY: "This step needs a passkey and you have none here yet: under Passkeys on "
    "this page, press Add a passkey, then approve again. Nothing ran.",
    Reason.PASSKEY_REQUIRED: "This step needs your passkey, not a spoken or tapped yes: press "
    "Approve and unlock with your fingerprint, face or screen lock. Nothing ran.",
    Reason.PASSKEY_UNSUPPORTED: "This browser cannot use passkeys; open the approve page in a "
    "current browser on your phone, or cancel. Nothing ran.",
    Reason.PASSKEY_CANCELLED: "The passkey prompt was closed or timed out; press Approve to try "
    "again, or cancel. Nothing ran.",
    Reason.PASSKEY_WRONG_RP: "Passkeys belong to this server's own address: open the approve "
    "page at the address the operator gave, then approve again. Nothing ran.",
    Reason.PASSKEY_WRONG_ORIGIN: "The passkey answer came from another web address than this "
    "server's; nothing ran. Use the approve page at the address the operator gave.",
    Reason.PASSKEY_MISMATCH: "That passkey answer was made for another card or for other "
    "arguments; nothing ran. Read the card again and approve it with your passkey.",
    Reason.PASSKEY_NOT_VERIFIED: "The passkey did not check that it was you (fingerprint, face "
    "or screen lock); unlock it when asked, then approve again. Nothing ran.",
    Reason.PASSKEY_BAD_SIGNATURE: "The passkey's signature did not check out; nothing ran. Try "
    "again, or remove this passkey and add it again.",
    Reason.PASSKEY_COUNTER: "This passkey's counter went backwards, a sign it may have been "
    "copied; nothing ran. Remove it, add a new passkey, and tell the operator.",
    Reason.UNKNOWN_PASSKEY: "That passkey is not registered for you here; use one listed under "
    "Passkeys, or add this one.",
    Reason.PASSKEY_REGISTRATION: "The new passkey could not be checked, so it was not added; "
    "press Add a passkey again and unlock it when asked.",
    Reason.PASSKEY_LIMIT: "You have as many passkeys as are kept; remove one to add another.",
    Reason.GRANT_SEVERAL_CARDS: "Nothing ran: a choice among several cards cannot be allowed "
    "again; approve it without 'allow the same'.",
    Reason.GRANT_HIGH_RISK: "Nothing ran: a high-risk action is asked about every time; approve "
    "it without 'allow the same'.",
    Reason.GRANT_OFF: "Nothing ran: the operator does not allow repeats of this action; approve "
    "it without 'allow the same'.",
    Reason.GRANT_BEYOND_LIMIT: "Nothing ran: that is longer or more times than this server "
    "allows; choose less, or approve just this once.",
    Reason.GRANT_NO_PAUSE: "Nothing ran: say yes, then a short pause, then how long ('yes... "
    "for ten minutes'); or tick 'allow the same' and tap Approve.",
    Reason.UNKNOWN_GRANT: "No such live grant of yours; list your grants again.",
    Reason.ALL_SEVERAL_CARDS: "Nothing ran: a choice among several cards is answered on its "
    "own; answer it, then approve the rest.",
    Reason.ALL_HIGH_RISK: "Nothing ran: a high-risk action is approved on its own; answer it, "
    "then approve the rest.",
    Reason.RATE_LIMITED: "Too many requests; wait a moment.",
    Reason.BUSY: "The recogniser is busy; retry in a second.",
    Reason.HEARING_UNAVAILABLE: "No recogniser answered in time; say it again in a moment, or tap.",
}

# The next step of an answer to a yes-or-no question (one card, or the final card), where it
# differs from the one for a choice among cards: there is no card number to say.
YES_NO_NEXT_STEP: dict[Reason, str] = {
    Reason.NOT_UNDERSTOOD: "Say 'yes', 'cancel' or 'more time', or tap.",
    Reason.HEDGE: "Take your time; say 'yes' when you are sure, or 'more time'.",
}

# The next step of a spoken answer to a yes-or-no question on a server whose recogniser takes
# no spoken yes (its calibration's yes threshold is infinite, as for base with Hindi on).
YES_BY_TAP = (
    "This server does not take a spoken yes: tap Approve to say yes. You can still say "
    "'cancel' or 'more time'."
)

# The next step after the first yes to a high-risk action: nothing has run yet.
SECOND_YES = (
    "High risk: nothing has run yet. Read the final card and say yes once more to run it, or "
    "cancel."
)

# The next step after a yes that moves a high-risk action on to its passkey step.
PASSKEY_STEP = (
    "High risk: nothing has run yet. Press Approve once more and confirm with your passkey "
    "(fingerprint, face or screen lock) to run it, or cancel."
)

# The next step of a refusal of a request that is not a recording, where it differs from the
# recording's (the device's JSON routes and the agent's ``/mcp``).
REQUEST_NEXT_STEP: dict[Reason, str] = {
    Reason.TOO_LARGE: "The request is too large; send a smaller one.",
}
