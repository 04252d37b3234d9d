// "Forget this device" takes two presses: the first arms it and says what it does, the second
// forgets. It disarms by itself after 8 s or when focus leaves it; one button, no dialog, so a
// switch or a keyboard does it as easily as a finger.

import { $ } from "/approve/dom.js";

const ARMED_MS = 8000;

export function bindForget(forget) {
  const button = $("forget");
  let timer = null;
  const disarm = () => {
    clearTimeout(timer);
    if (button.dataset.armed !== "true") return;
    button.dataset.armed = "false";
    button.textContent = "Forget this device";
    $("forget-status").textContent = "";
  };
  button.addEventListener("click", async () => {
    if (button.dataset.armed !== "true") {
      button.dataset.armed = "true";
      button.textContent = "Press again to forget this device";
      $("forget-status").textContent =
        "This browser would lose its key and stop answering; pairing again needs a new code.";
      timer = setTimeout(disarm, ARMED_MS);
      return;
    }
    disarm();
    await forget();
  });
  button.addEventListener("blur", disarm);
}
