// Grants: "Approve, and allow the same for 10 minutes". The choice sits on a card the server
// offers it for (one card, not high-risk, a tool the operator lets be repeated), with what stays
// fixed and what may change; it rides in the signed tap, or is said after a spoken yes ("yes, for
// ten minutes", the count from this choice riding in the signed upload), so only this device can
// make one. The
// "Allowed again" list shows the live grants, each with a one-press "End now".

import { $, el } from "/approve/dom.js";
import { signedFetch } from "/approve/device.js";

const MINUTES = [2, 5, 10, 30, 60];
const USES = [1, 3, 5, 10];

function choices(values, most, unit) {
  const kept = values.filter((v) => v <= most);
  if (!kept.length || kept[kept.length - 1] !== most) kept.push(most);
  return kept.map((v) => el("option", { value: String(v) }, `${v} ${unit(v)}`));
}

function pick(select, wanted) {
  const values = [...select.options].map((o) => Number(o.value));
  const best = values.filter((v) => v <= wanted).pop() ?? values[0];
  select.value = String(best);
}

// The grant choice of ``set`` (whose ``grant`` the server filled in), or null.
export function grantChoice(set, name) {
  const offer = set.grant;
  if (!offer || set.stage !== "choose" || set.cards.length !== 1) return null;
  const id = set.id;
  const box = el("input", { type: "checkbox", id: `grant-on-${id}`, class: "grant-on",
    "aria-describedby": `grant-what-${id}` });
  const minutes = el("select", { id: `grant-minutes-${id}`, class: "grant-minutes" },
    ...choices(MINUTES, offer.max_minutes, (v) => (v === 1 ? "minute" : "minutes")));
  const uses = el("select", { id: `grant-uses-${id}`, class: "grant-uses" },
    ...choices(USES, offer.max_uses, (v) => (v === 1 ? "time" : "times")));
  pick(minutes, 10);
  pick(uses, 5);
  const label = el("label", { for: box.id }, "");
  const fixed = offer.fixed.length ? offer.fixed.join(", ") : "nothing";
  const varying = offer.varying.length ? offer.varying.join(", ") : "nothing";
  const what = el("p", { class: "muted", id: `grant-what-${id}` }, "");
  // The words to say name a length within the operator's bound (one past it refuses the whole
  // answer), and the count a spoken grant takes from this card is said even while it is hidden.
  const sayLabel = () => {
    label.textContent = `Approve, and allow the same for ${minutes.value} minutes`;
    what.textContent = `Stays exactly as on this card: ${fixed}. May change: ${varying}. ` +
      `Tick it and tap Approve, or say “yes, for ${minutes.value} minutes”: yes, a short ` +
      `pause, then how long; said, it allows the same at most ${uses.value} times. A plain ` +
      "yes approves this once. High-risk actions and choices among several cards are always " +
      "asked.";
  };
  sayLabel();
  minutes.addEventListener("change", sayLabel);
  uses.addEventListener("change", sayLabel);
  // How long and how many times, shown once the box is ticked: a card stays short otherwise.
  const bounds = el("p", { class: "grant-bounds" },
    el("label", { for: minutes.id }, "How long "), minutes, " ",
    el("label", { for: uses.id }, "How many times, at most "), uses);
  bounds.hidden = true;
  box.setAttribute("aria-expanded", "false");
  box.setAttribute("aria-controls", `grant-bounds-${id}`);
  bounds.id = `grant-bounds-${id}`;
  box.addEventListener("change", () => {
    bounds.hidden = !box.checked;
    box.setAttribute("aria-expanded", String(box.checked));
  });
  return el("div", { class: "grant", role: "group", "aria-label": `Allow ${name} again` },
    el("p", { class: "grant-toggle" }, box, " ", label),
    bounds,
    what);
}

// The grant part of a yes to ``pendingId`` as the tap sends it, or undefined when not asked.
export function grantAsked(pendingId) {
  const box = $(`grant-on-${pendingId}`);
  if (!box || !box.checked) return undefined;
  return {
    minutes: Number($(`grant-minutes-${pendingId}`).value),
    uses: Number($(`grant-uses-${pendingId}`).value),
  };
}

// How many times a spoken grant of ``pendingId`` allows the same: the count this card shows,
// or undefined where it offers no grant.
export function grantUses(pendingId) {
  const uses = $(`grant-uses-${pendingId}`);
  return uses ? Number(uses.value) : undefined;
}

// The line an answer that made a grant adds to its result.
export function grantLine(grant) {
  const minutes = Math.round((grant.expires_at - grant.created_at) / 60);
  return { cls: "granted", text: `Allowed the same for ${minutes} minutes, at most ${grant.max_uses} ` +
    "times. End it under “Allowed again”." };
}

export function showGrants(on) {
  $("grants-section").hidden = !on;
  if (on) loadGrants();
}

let shown = "";

// Whether any grant is listed: the page then refreshes the list now and then, as the agent
// spends its uses.
export const anyGrants = () => $("grants").children.length > 0;

export async function loadGrants() {
  const response = await signedFetch("GET", "/device/grants");
  if (!response.ok) return;
  const body = await response.json();
  const now = JSON.stringify(body.grants.map((g) => [g.id, g.uses_left]));
  // Unchanged: left alone, so focus on an "End now" stays where it is.
  if (now === shown) return;
  shown = now;
  const focused = document.activeElement && document.activeElement.closest("[data-grant-id]");
  const keep = focused ? focused.dataset.grantId : null;
  $("grants").replaceChildren(...body.grants.map((g) => grantItem(g)));
  $("grants-empty").hidden = body.grants.length > 0;
  const again = keep && $("grants").querySelector(`[data-grant-id="${CSS.escape(keep)}"] button`);
  if (again) again.focus();
}

function grantItem(grant) {
  const until = new Date(grant.expires_at * 1000).toLocaleTimeString();
  const varying = grant.varying.length ? `; may change: ${grant.varying.join(", ")}` : "";
  const what = `${grant.text}${varying}`;
  return el("li", { "data-grant-id": grant.id },
    el("span", { class: "grant-text" }, what),
    el("span", { class: "muted" },
      ` Until ${until}, ${grant.uses_left} of ${grant.max_uses} left (${grant.id}).`),
    el("div", { class: "take-actions" }, el("button", {
      type: "button", class: "danger", "aria-label": `End now: ${grant.tool} (${grant.id})`,
      onclick: () => endGrant(grant),
    }, "End now")));
}

async function endGrant(grant) {
  const response = await signedFetch("DELETE", `/device/grants/${encodeURIComponent(grant.id)}`);
  const body = await response.json();
  await loadGrants();
  $("grant-status").textContent = response.ok
    ? `Ended: ${grant.tool} is asked about again.` : body.next_step;
  $("grants-title").focus();
}
