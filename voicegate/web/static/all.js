// Approve several: when two or more single cards wait (not high-risk, not a choice), the page
// offers "Approve all N" under them. One signed answer approves each; the server still releases
// each on its own, once, with its own receipt, and refuses the whole answer if any set may not be
// approved this way. A card cut for display is opened first, as a single Approve does.

import { $ } from "/approve/dom.js";

// The sets "Approve all" answers: waiting one-card sets at their only question, not high-risk.
export function eligible(sets) {
  return [...sets].filter((s) => s.stage === "choose" && s.cards.length === 1 && s.risk !== "high");
}

// The server answers at most this many sets at once (voicegate/gate/batch.py, MAX_AT_ONCE).
const MAX_AT_ONCE = 10;
// A card that just arrived is not approved with the rest until it has been on screen this long
// (ms): a press meant for "Approve all 2" must not approve a third card that came a moment before.
const SETTLE_MS = 2000;
let named = { ids: "", since: 0 };

// The sets the button answers now: the first MAX_AT_ONCE eligible ones, in page order.
function batch(sets) {
  return eligible(sets).slice(0, MAX_AT_ONCE);
}

// Show or hide the button for ``sets`` (the sets on screen now); while the sets it would answer
// have just changed, it says so and answers nothing.
export function showAll(sets) {
  const ready = batch(sets);
  const box = $("all-box");
  box.hidden = ready.length < 2;
  if (box.hidden) return;
  const ids = ready.map((s) => s.id).join(" ");
  if (ids !== named.ids) named = { ids, since: Date.now() };
  const button = $("approve-all");
  const label = ready.length < eligible(sets).length ? `Approve the first ${ready.length}`
    : `Approve all ${ready.length}`;
  if (button.textContent !== label) button.textContent = label;
  const settling = Date.now() - named.since < SETTLE_MS;
  // The page's next poll (every 1.5 s) shows it ready again.
  button.setAttribute("aria-disabled", String(settling));
}

// The sets a press answers: those the button has named for at least SETTLE_MS, or null.
export function settled(sets) {
  const ready = batch(sets);
  const ids = ready.map((s) => s.id).join(" ");
  if (ids !== named.ids || Date.now() - named.since < SETTLE_MS) return null;
  return ready;
}

export function allStatus(text) {
  $("all-status").textContent = text;
}
