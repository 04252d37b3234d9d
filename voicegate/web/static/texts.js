// What the page says: names of cards and sets, times left, and the lines of an answer's result.
// Pure functions of the server's JSON, so a test can check them without a server.

const LABEL_CHARS = 30;
// Reasons whose next step says nothing was heard: a transcript shown above them must not say
// the opposite.
const NOTHING_HEARD = new Set(["no_speech", "silent"]);

function shortValue(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > LABEL_CHARS ? `${text.slice(0, LABEL_CHARS - 1)}…` : text;
}

// One name per card, for buttons and announcements: "write_note 'shopping'". With several
// cards, the first argument whose values differ tells them apart.
export function cardLabels(cards) {
  const keys = [...new Set(cards.flatMap((c) => Object.keys(c.arguments || {})))].sort();
  const differing = cards.length > 1
    ? keys.find((k) => new Set(cards.map((c) => JSON.stringify((c.arguments || {})[k]))).size > 1)
    : undefined;
  return cards.map((card) => {
    const args = card.arguments || {};
    const key = differing ?? Object.keys(args).sort()[0];
    return key === undefined || args[key] === undefined
      ? card.tool : `${card.tool} '${shortValue(args[key])}'`;
  });
}

export function setLabel(set) {
  const labels = cardLabels(set.cards);
  if (set.stage === "final" && set.chosen) return labels[set.chosen - 1];
  if (set.cards.length === 1) return labels[0];
  // A choice the agent asked as a question (choose_one) is named by its question.
  const tools = [...new Set(set.cards.map((c) => c.tool))].join(", ");
  const question = Array.from((set.preview || "").trim()); // by character, never half an emoji
  if (question.length) {
    const short = question.length > 60
      ? `${question.slice(0, 59).join("").trimEnd()}…` : question.join("");
    return `“${short}” (one of ${set.cards.length}: ${tools})`;
  }
  return `one of ${set.cards.length}: ${tools}`;
}

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
export function answerLines(body, name) {
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
  } else if (body.stage === "final" && !body.reason) {
    lines.push({ cls: "ok", text: `Chosen: ${name}. To do it, press Approve again or say “yes”.` });
  } else if (body.released) {
    lines.push({ cls: "no", text: `Approved, but it failed: ${name}.` });
    if (nextStep) lines.push({ cls: "next-step", text: nextStep });
  } else {
    lines.push({ cls: "no", text: "Nothing ran." });
    if (nextStep) lines.push({ cls: "next-step", text: nextStep });
  }
  return lines;
}
