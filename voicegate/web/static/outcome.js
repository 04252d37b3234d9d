// An answer's result, shown in the set it answers (beside the button pressed, and read out by
// the set's own status region), and a set that has closed: kept in place, its buttons gone, with
// what happened and a Dismiss button, so a sighted user sees it too.

import { el } from "/approve/dom.js";

// How many closed sets stay on the page; the oldest goes first.
const KEEP_CLOSED = 3;

// ``lines``: [{cls, text, heard}] (texts.js), shown in ``article``'s result region.
export function showIn(article, lines, { reason = "", released = false } = {}) {
  const box = article.querySelector(".set-result");
  box.replaceChildren(...lines.map((line) => el("p", { class: line.cls || undefined },
    line.text, ...(line.heard !== undefined ? [el("q", { class: "heard" }, line.heard)] : []))));
  box.dataset.reason = reason;
  box.dataset.released = String(released);
  return box;
}

// The set is no longer waiting: ``lines`` (when given) say why; ``dismissed()`` runs after its
// Dismiss button removed it.
export function closeSet(article, name, lines, dismissed) {
  article.classList.add("closed");
  article.classList.remove("warning");
  for (const gone of article.querySelectorAll(".card-actions, .actions, .warn-line, .risk-line, .final-help, .grant")) {
    gone.remove();
  }
  article.querySelector("[data-countdown]").textContent = "Closed";
  if (lines) showIn(article, lines);
  article.append(el("button", {
    type: "button", class: "quiet dismiss", "aria-label": `Dismiss ${name}`,
    onclick: () => {
      article.remove();
      dismissed();
    },
  }, "Dismiss"));
  const closed = [...article.parentElement.querySelectorAll("article.closed")];
  for (const old of closed.slice(0, Math.max(0, closed.length - KEEP_CLOSED))) old.remove();
}
