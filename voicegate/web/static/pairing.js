// Pairing: the operator's one-time code and a key pair made here, whose public half the server
// keeps. ``aria-busy`` while the server answers, ``aria-invalid`` on a code it refused.

import { $ } from "/approve/dom.js";
import { makeKeys, saveDevice, session, syncClock } from "/approve/device.js";

function codeInvalid(message) {
  $("pair-error").textContent = message;
  $("pair-code").setAttribute("aria-invalid", "true");
  $("pair-code").focus();
}

async function pair(event, onPaired) {
  event.preventDefault();
  const code = $("pair-code").value.trim();
  $("pair-error").textContent = "";
  $("pair-code").removeAttribute("aria-invalid");
  if (!/^[0-9 -]{8,12}$/.test(code)) {
    codeInvalid("The code is 8 digits.");
    return;
  }
  $("pair-button").disabled = true;
  $("pair-form").setAttribute("aria-busy", "true");
  $("pair-status").textContent = "Pairing…";
  try {
    const made = await makeKeys();
    const response = await fetch("/device/pair", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        code,
        name: $("pair-name").value.trim() || navigator.platform || "",
        public_key: made.publicKey,
      }),
    });
    syncClock(response);
    const answer = await response.json();
    if (!response.ok) {
      codeInvalid(answer.next_step || "Pairing failed.");
      return;
    }
    session.device = { id: answer.device_id, user: answer.user, kind: answer.kind, keys: made.keys };
    await saveDevice(session.device);
    onPaired(answer.user);
  } catch (err) {
    $("pair-error").textContent =
      "Pairing failed: this page needs a secure address (https or localhost).";
  } finally {
    $("pair-button").disabled = false;
    $("pair-form").removeAttribute("aria-busy");
    $("pair-status").textContent = "";
  }
}

export function bindPairing(onPaired) {
  $("pair-form").addEventListener("submit", (event) => pair(event, onPaired));
  $("pair-code").addEventListener("input", () => $("pair-code").removeAttribute("aria-invalid"));
}
