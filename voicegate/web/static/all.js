// Approve several: when two or more single cards wait (not high-risk, not a choice), the page
// offers "Approve all N" under them. One signed answer approves each; the server still releases
// each on its own, once, with its own receipt, and refuses the whole answer if any set may not be
// approved this way. A card cut for display is opened first, as a single Approve does.

import { $ } from "/approve/dom.js";

// The sets "Approve all" answers: waiting one-card sets at their only question, not high-risk.
export function eligible(sets) {
  return [...sets].filter((s) => s.stage === "choose" && s.cards.length === 1 && s.risk !== "high");
}

// Show or hide the button for ``sets`` (the sets on screen now).
export function showAll(sets) {
  const ready = eligible(sets);
  const box = $("all-box");
  box.hidden = ready.length < 2;
  if (box.hidden) return;
  const label = `Approve all ${ready.length}`;
  if ($("approve-all").textContent !== label) $("approve-all").textContent = label;
}

export function allStatus(text) {
  $("all-status").textContent = text;
}
