// One waiting set as the page shows it: each card told as a sentence (its exact card text one
// press away, and the whole text of a shortened one), an Approve button on each, Speak, More
// time and Cancel, and the set's own result line right under them.

import { $, el } from "/approve/dom.js";

export const WARN_SECONDS = 30; // the warning comes at least 20 s before the deadline

// ``ctx``: {name, suffix (tells apart sets with the same name), expanded: Set of card numbers
// whose whole text was shown, approve(number, event), expand(number), moreTime(),
// cancel(event), speak: a Speak button or null, grant: the grant choice or null}.
export function buildSet(set, ctx) {
  const titleId = `title-${set.id}`;
  const countId = `count-${set.id}`;
  const final = set.stage !== "choose";
  const passkey = set.stage === "passkey";
  const many = set.cards.length > 1 && !final;
  const title = final
    ? `Final check: ${ctx.name}`
    : many ? `Choose one of ${set.cards.length}` : `Approve ${ctx.name}?`;
  const article = el("article", {
    class: final ? "set final" : "set",
    "data-pending-id": set.id,
    "aria-labelledby": titleId,
    "aria-describedby": countId,
  });
  article.append(el("div", { class: "set-head" },
    el("h3", { id: titleId }, title),
    el("p", { class: "countdown", id: countId, "data-countdown": "" }, "")));
  if (set.risk === "high" && !final) {
    // Marked before the first Approve, not only at the second step.
    article.append(el("p", { class: "risk-line" },
      "⚠ High risk: after Approve you are asked once more, on this page."));
  }
  if (set.preview) article.append(el("p", { class: "preview" }, set.preview));
  if (passkey) {
    article.append(el("p", { class: "final-help" },
      "This is the last step. Press Approve, then confirm with your passkey (fingerprint, " +
      "face or screen lock), or Cancel."));
  } else if (final) {
    article.append(el("p", { class: "final-help" },
      "This is the second step. Press Approve once more to do it, or Cancel."));
  }
  const warnLine = el("p", { class: "warn-line" },
    "Time is nearly up. Press “More time” (or M) if you need longer.");
  warnLine.hidden = true;
  article.append(warnLine);

  const list = el("ol", { class: "cards", "aria-label": `Actions in ${ctx.name}` });
  const shown = final ? set.cards.filter((c) => c.number === set.chosen) : set.cards;
  for (const card of shown) list.append(buildCard(set, card, many, ctx));
  article.append(list);
  if (ctx.grant) article.append(ctx.grant);

  const actions = el("div", { class: "actions" });
  if (ctx.speak) actions.append(ctx.speak);
  actions.append(el("button", {
    type: "button", class: "more", "aria-keyshortcuts": "M",
    "aria-label": `More time for ${ctx.name}`, onclick: () => ctx.moreTime(),
  }, "More time"));
  actions.append(el("button", {
    type: "button", class: "danger cancel", "aria-label": `Cancel ${ctx.name}`,
    onclick: (event) => ctx.cancel(event),
  }, "Cancel"));
  article.append(actions);
  // The answer's result shows here, beside the button pressed, and is read out.
  article.append(el("div", {
    class: "set-result", role: "status", "aria-live": "polite", "aria-atomic": "true",
  }));
  return article;
}

function buildCard(set, card, many, ctx) {
  const label = card.label + ctx.suffix;
  const sentenceId = `sentence-${set.id}-${card.number}`;
  const textId = `text-${set.id}-${card.number}`;
  const whole = ctx.expanded.has(card.number);
  const sentence = card.sentence || card.text;
  const text = el("p", { class: "text", id: textId }, whole ? card.full_text : card.text);
  const item = el("li", { class: "card", "data-card": card.number },
    el("span", { class: "num", "aria-hidden": "true" }, String(card.number)),
    el("p", { class: "sentence", id: sentenceId },
      whole ? card.full_sentence || sentence : sentence),
    text);
  if (set.stage !== "choose") item.classList.add("chosen");
  const buttons = el("div", { class: "card-actions" });
  // The exact card text is one press away: "Show all" on a card cut for display (which also
  // tells the server it was shown), "Exact details" on any other.
  text.hidden = !whole;
  if (card.shortened) buttons.append(expandButton(card, label, [sentenceId, textId], whole, ctx));
  else buttons.append(detailsButton(label, textId));
  buttons.append(el("button", {
    type: "button", class: "approve primary", "data-card": card.number,
    "aria-label": many ? `Approve ${card.number}: ${label}` : `Approve ${label}`,
    onclick: (event) => ctx.approve(card.number, event),
  }, "Approve"));
  item.append(buttons);
  return item;
}

// "Exact details": the card text itself (the tool and every argument as JSON) under the
// sentence, for a card whose sentence already shows every value whole.
function detailsButton(label, textId) {
  const button = el("button", { type: "button", class: "details", "aria-controls": textId });
  const show = (on) => {
    button.setAttribute("aria-expanded", String(on));
    button.textContent = on ? "Hide details" : "Exact details";
    button.setAttribute("aria-label", `${on ? "Hide details" : "Exact details"} of ${label}`);
  };
  show(false);
  button.addEventListener("click", () => {
    const on = button.getAttribute("aria-expanded") !== "true";
    show(on);
    $(textId).hidden = !on;
  });
  return button;
}

// "Show all" on a card whose text was cut: the whole sentence and text in place, and the set
// remembers it was shown (a yes to a shortened card names it, or the server refuses it).
function expandButton(card, label, [sentenceId, textId], whole, ctx) {
  const button = el("button", {
    type: "button", class: "expand", "aria-controls": `${sentenceId} ${textId}`,
  });
  const show = (on) => {
    button.setAttribute("aria-expanded", String(on));
    button.textContent = on ? "Show less" : "Show all";
    button.setAttribute("aria-label", `${on ? "Show less" : "Show all"} of ${label}`);
  };
  show(whole);
  button.addEventListener("click", () => {
    const on = button.getAttribute("aria-expanded") !== "true";
    show(on);
    const short = card.sentence || card.text;
    $(sentenceId).textContent = on ? card.full_sentence || short : short;
    $(textId).textContent = on ? card.full_text : card.text;
    $(textId).hidden = !on;
    if (on) ctx.expand(card.number);
  });
  return button;
}

// The countdowns of the sets still open; ``warn(article, secondsLeft)`` once per set and
// deadline, near the end.
export function tick(t, warned, warn) {
  for (const article of $("sets").querySelectorAll("article.set:not(.closed)")) {
    const deadline = Number(article.dataset.deadline);
    const left = Math.max(0, Math.round(deadline - t));
    const minutes = Math.floor(left / 60);
    const seconds = String(left % 60).padStart(2, "0");
    article.querySelector("[data-countdown]").textContent = `${minutes}:${seconds} left`;
    const warning = left <= WARN_SECONDS;
    article.classList.toggle("warning", warning);
    article.querySelector(".warn-line").hidden = !warning || left === 0;
    const key = `${article.dataset.pendingId}:${deadline}`;
    if (warning && left > 0 && !warned.has(key)) {
      warned.add(key);
      warn(article, left);
    }
  }
}
