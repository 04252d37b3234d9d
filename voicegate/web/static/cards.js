// One waiting set as the page shows it: the cards with their text (and the whole text of a
// shortened one on request), an Approve button on each, and Speak, More time and Cancel.

import { $, el } from "/approve/dom.js";
import { cardLabels } from "/approve/texts.js";

export const WARN_SECONDS = 30; // the warning comes at least 20 s before the deadline

// ``ctx``: {name, suffix (tells apart sets with the same name), expanded: Set of card numbers whose whole text was shown, approve(number,
// event), expand(number), moreTime(), cancel(event), speak: a Speak button or null}.
export function buildSet(set, ctx) {
  const titleId = `title-${set.id}`;
  const countId = `count-${set.id}`;
  const final = set.stage === "final";
  const many = set.cards.length > 1 && !final;
  const labels = cardLabels(set.cards);
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
  if (set.preview) article.append(el("p", { class: "preview" }, set.preview));
  if (final) {
    article.append(el("p", { class: "final-help" },
      "This is the second step. Press Approve once more to do it, or Cancel."));
  }
  const warnLine = el("p", { class: "warn-line" },
    "Time is nearly up. Press “More time” (or M) if you need longer.");
  warnLine.hidden = true;
  article.append(warnLine);

  const list = el("ol", { class: "cards", "aria-label": `Actions in ${ctx.name}` });
  const shown = final ? set.cards.filter((c) => c.number === set.chosen) : set.cards;
  for (const card of shown) {
    const label = labels[card.number - 1] + ctx.suffix;
    const textId = `text-${set.id}-${card.number}`;
    const whole = ctx.expanded.has(card.number);
    const item = el("li", { class: final ? "card chosen" : "card", "data-card": card.number },
      el("span", { class: "num", "aria-hidden": "true" }, String(card.number)),
      el("p", { class: "text", id: textId }, whole ? card.full_text : card.text));
    const buttons = el("div", { class: "card-actions" });
    if (card.shortened) buttons.append(expandButton(card, label, textId, whole, ctx));
    buttons.append(el("button", {
      type: "button", class: "approve primary", "data-card": card.number,
      "aria-label": many ? `Approve ${card.number}: ${label}` : `Approve ${label}`,
      onclick: (event) => ctx.approve(card.number, event),
    }, "Approve"));
    item.append(buttons);
    list.append(item);
  }
  article.append(list);

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
  return article;
}

// "Show all" on a card whose text was cut: the whole text in place, and the set remembers it
// was shown (a yes to a shortened card names it, or the server refuses it).
function expandButton(card, label, textId, whole, ctx) {
  const button = el("button", {
    type: "button", class: "expand", "aria-controls": textId,
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
    button.closest("li").querySelector(".text").textContent = on ? card.full_text : card.text;
    if (on) ctx.expand(card.number);
  });
  return button;
}

// The countdowns; ``warn(article, secondsLeft)`` once per set and deadline, near the end.
export function tick(t, warned, warn) {
  for (const article of $("sets").children) {
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
