// The Speak button of a card set: hold to talk, or press once to start and once to stop
// (recorder.js). The recording goes to ``send(pendingId, blob)``; a microphone that cannot
// start goes to ``failed()``.

import { el } from "/approve/dom.js";
import { pressToRecord, recording, start, stop } from "/approve/recorder.js";

export function speakButton(pendingId, name, send, failed) {
  const button = el("button", {
    type: "button", class: "speak", "aria-pressed": "false",
    "aria-label": `Speak your answer for ${name}`,
    "aria-describedby": "speak-help",
  }, "Speak");
  const owner = { pendingId };
  const reset = () => {
    button.setAttribute("aria-pressed", "false");
    button.textContent = "Speak";
    button.setAttribute("aria-label", `Speak your answer for ${name}`);
  };
  const toggle = () => {
    if (recording()) {
      stop();
      return;
    }
    const started = start(owner, (blob) => {
      reset();
      send(pendingId, blob);
    }, () => {
      reset();
      failed();
    });
    if (!started) return;
    button.setAttribute("aria-pressed", "true");
    button.textContent = "Listening… press to stop";
    // The accessible name starts with the visible words (WCAG 2.5.3).
    button.setAttribute("aria-label", `Listening… press to stop, for ${name}`);
  };
  const held = () => {
    button.textContent = "Listening… let go to stop";
    button.setAttribute("aria-label", `Listening… let go to stop, for ${name}`);
  };
  pressToRecord(button, toggle, () => recording() && recording().owner === owner, held);
  return button;
}
