// "How to answer": the help folded under one disclosure, open or shut as the user left it last
// time in this browser, and worded for what this server hears (a yes by voice, or by tap only).

import { $ } from "/approve/dom.js";

const HOW_SETTING = "voicegate.how";

export function bindHelp() {
  const how = $("how");
  try {
    how.open = localStorage.getItem(HOW_SETTING) === "open";
  } catch (err) {
    // Storage blocked: shut, as on a first visit.
  }
  how.addEventListener("toggle", () => {
    try {
      localStorage.setItem(HOW_SETTING, how.open ? "open" : "shut");
    } catch (err) {
      // Storage blocked: the disclosure keeps its state for this visit only.
    }
  });
}

// The words Speak takes here: with Hindi on (``base``) a yes is a tap only.
export function speakWords(yesByVoice) {
  $("speak-words").textContent = yesByVoice
    ? "Say “yes”, a card number such as “the second one”, “cancel” or “more time”."
    : "Say a card number such as “the second one”, “cancel” or “more time”. This server " +
      "takes a yes by tap only: press Approve.";
}
