// What the page says: times left, and the lines of an answer's result. Pure functions of the
// server's JSON, so a test can check them without a server. The names of cards and sets come
// from the server (``label`` and ``name`` in /device/pending, voicegate/gate/card.py ``names``):
// each tells its card apart from the others and shows the agent's text escaped.

// Reasons whose next step says nothing was heard: a transcript shown above them must not say
// the opposite.
const NOTHING_HEARD = new Set(["no_speech", "silent"]);

export function timeWords(seconds) {
  const left = Math.max(0, Math.round(seconds));
  const minutes = Math.floor(left / 60);
  const rest = left % 60;
  const parts = [];
  if (minutes) parts.push(`${minutes} minute${minutes === 1 ? "" : "s"}`);
  if (rest || !minutes) parts.push(`${rest} second${rest === 1 ? "" : "s"}`);
  return parts.join(" ");
}

// A transcript with no letter or digit ("." or "…") says nothing was understood.
export function meaningful(text) {
  return /[\p{L}\p{N}]/u.test(text || "");
}

// The lines of one answer's result: [{cls, text, heard}], where ``heard`` marks the transcript.
export function answerLines(body, name, yesByVoice = true) {
  const lines = [];
  const guess = (body.heard || [])[0] || "";
  const spoken = Array.isArray(body.heard) && body.heard.length > 0;
  const nothingHeard = NOTHING_HEARD.has(body.reason);
  let nextStep = body.next_step;
  if (spoken && meaningful(guess) && nothingHeard) {
    lines.push({ cls: "", text: "Not clear enough to be sure it was speech. Best guess: ",
      heard: guess });
    nextStep = "Say your answer again, a little closer to the microphone, or tap.";
  } else if (spoken && meaningful(guess) && body.reason === "unclear") {
    // Heard, but not surely enough to act on: a guess, not what was heard.
    lines.push({ cls: "", text: "Best guess: ", heard: guess });
  } else if (spoken && meaningful(guess)) {
    lines.push({ cls: "", text: "Heard: ", heard: guess });
  } else if (spoken && !nothingHeard) {
    lines.push({ cls: "", text: "No words were made out." });
  }
  if (body.released && !body.reason) {
    lines.push({ cls: "ok", text: `Done: ${name}.` });
    if (body.receipt_id) lines.push({ cls: "muted", text: `Receipt ${body.receipt_id}` });
  } else if (body.decision === "more_time" && !body.reason) {
    lines.push({ cls: "ok", text: `More time for ${name}: ${timeWords(body.seconds_left)} left.` });
  } else if (body.decision === "cancel" && !body.reason) {
    lines.push({ cls: "ok", text: `Cancelled ${name}. Nothing ran.` });
  } else if (body.stage === "passkey" && !body.reason) {
    lines.push({ cls: "ok", text: `Chosen: ${name}. To do it, press Approve again and confirm ` +
      "with your passkey." });
  } else if (body.stage === "final" && !body.reason) {
    // Nothing ran yet: a step, not a success.
    lines.push({ cls: "step", text: yesByVoice
      ? `Chosen: ${name}. Nothing has run yet: to do it, press Approve again or say “yes”.`
      : `Chosen: ${name}. Nothing has run yet: to do it, press Approve again.` });
  } else if (body.released) {
    lines.push({ cls: "no", text: `Approved, but it failed: ${name}.` });
    if (nextStep) lines.push({ cls: "next-step", text: nextStep });
  } else {
    lines.push({ cls: "no", text: "Nothing ran." });
    if (nextStep) lines.push({ cls: "next-step", text: nextStep });
  }
  return lines;
}

// Why a set left the page without this page's answer, from its status (GET /device/sets/ID).
export function closedLine(status, name) {
  switch (status) {
    case "expired":
      return { cls: "no", text: `Time ran out for ${name}. Nothing ran.` };
    case "withdrawn":
      return { cls: "no", text: `${name} was taken back by the agent. Nothing ran.` };
    case "cancelled":
      return { cls: "no", text: `${name} was cancelled on another device. Nothing ran.` };
    case "confirmed":
      return { cls: "ok", text: `${name} was approved on another device, and done.` };
    case "failed":
      return { cls: "no", text: `${name} was approved on another device, but it failed.` };
    case "executing":
    case "unknown":
      return { cls: "no", text: `${name} was approved on another device; it may have run.` };
    default:
      return { cls: "no", text: `${name} is no longer waiting.` };
  }
}
