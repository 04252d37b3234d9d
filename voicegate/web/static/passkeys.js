// Passkeys: register, list and remove the user's passkeys, and make the assertion of a
// high-risk card's passkey step. The challenge comes from the server, which recomputes it from
// the set, the step's nonce and the action when the answer arrives; the answer is a signed
// device request, so both this device and the passkey are proven. Whatever the browser cannot
// do (no WebAuthn, a closed prompt, a page away from the passkeys' address) is sent as a
// ``failure`` the server refuses by name, so the page shows one kind of result.

import { $, el } from "/approve/dom.js";
import { postJson, signedFetch } from "/approve/device.js";

const state = { rpId: null, origin: null };

function fromB64url(text) {
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0)).buffer;
}

function b64url(buffer) {
  let text = "";
  for (const b of new Uint8Array(buffer)) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export function supported() {
  return Boolean(window.PublicKeyCredential && navigator.credentials &&
    navigator.credentials.get && navigator.credentials.create);
}

// Whether this page's address may use passkeys made for ``rpId``: the same name, or a name
// under it. A page at 127.0.0.1 cannot use passkeys made for "localhost".
function onRp(rpId) {
  const host = location.hostname;
  return Boolean(rpId) && (host === rpId || host.endsWith(`.${rpId}`));
}

function status(text) {
  $("passkey-status").textContent = text;
}

export function showPasskeys(on) {
  $("passkeys-section").hidden = !on;
  if (on) loadPasskeys();
}

export async function loadPasskeys() {
  const response = await signedFetch("GET", "/device/passkeys");
  if (!response.ok) return;
  const body = await response.json();
  state.rpId = body.rp_id;
  state.origin = body.origin;
  const list = $("passkeys");
  list.replaceChildren(...body.passkeys.map((p) => passkeyItem(p)));
  $("passkeys-empty").hidden = body.passkeys.length > 0;
}

function passkeyItem(passkey) {
  const name = passkey.name || "Passkey";
  const added = new Date(passkey.created_at * 1000).toLocaleDateString();
  const used = passkey.last_used_at
    ? `, last used ${new Date(passkey.last_used_at * 1000).toLocaleDateString()}` : "";
  return el("li", { "data-passkey-id": passkey.id },
    el("span", {}, `${name} (added ${added}${used}; ${passkey.id})`),
    el("div", { class: "take-actions" }, el("button", {
      type: "button", class: "danger", "aria-label": `Remove ${name} (${passkey.id})`,
      onclick: () => removePasskey(passkey.id, name),
    }, "Remove")));
}

async function removePasskey(id, name) {
  const response = await signedFetch("DELETE", `/device/passkeys/${encodeURIComponent(id)}`);
  const body = await response.json();
  await loadPasskeys();
  status(response.ok ? `Removed ${name}.` : body.next_step);
  $("passkey-add").focus();
}

// What stops this page making a passkey for this server, as a failure name, or null.
function blocked() {
  if (!supported()) return "unsupported";
  if (!onRp(state.rpId)) return "wrong_rp";
  return null;
}

const FAILED_HERE = {
  unsupported: "This browser cannot make passkeys. Use a current browser on your phone.",
  wrong_rp: "Passkeys here belong to another address of this server",
};

async function addPasskey() {
  status("");
  // Pressed before the list arrived: the server's RP id is needed first.
  if (!state.rpId) await loadPasskeys();
  const why = blocked();
  if (why) {
    const where = why === "wrong_rp" && state.origin ? `: open ${state.origin}/approve.` : "";
    status(why === "wrong_rp" ? `${FAILED_HERE.wrong_rp}${where || "."}` : FAILED_HERE[why]);
    return;
  }
  const options = await (await postJson("/device/passkeys/options", {})).json();
  const ask = options.publicKey;
  if (!ask) {
    status(options.next_step || "Passkeys are not available on this server.");
    return;
  }
  status("Follow your phone's prompt to make the passkey.");
  let credential;
  try {
    credential = await navigator.credentials.create({ publicKey: {
      ...ask,
      challenge: fromB64url(ask.challenge),
      user: { ...ask.user, id: fromB64url(ask.user.id) },
      excludeCredentials: ask.excludeCredentials.map((c) => ({ ...c, id: fromB64url(c.id) })),
    } });
  } catch (err) {
    status("No passkey was made: the prompt was closed, or this phone has one for this " +
      "server already. Press Add a passkey to try again.");
    return;
  }
  const response = await postJson("/device/passkeys", {
    name: $("passkey-name").value.trim(),
    credential: {
      id: credential.id, rawId: b64url(credential.rawId), type: credential.type,
      response: {
        clientDataJSON: b64url(credential.response.clientDataJSON),
        attestationObject: b64url(credential.response.attestationObject),
      },
    },
  });
  const body = await response.json();
  await loadPasskeys();
  if (!response.ok) {
    status(`Not added: ${body.next_step}`);
    return;
  }
  $("passkey-name").value = "";
  status(`Added ${body.name || "the passkey"}. High-risk actions can now ask for it.`);
}

// The body of a passkey step's answer: the assertion, or why the browser made none.
export async function assertFor(set) {
  const ask = set.passkey;
  if (!supported()) return { failure: "unsupported" };
  if (!ask || !onRp(ask.rp_id)) return { failure: "wrong_rp" };
  // None registered: no prompt to show; the server answers what to do (no_passkey).
  if (!ask.credentials.length) return {};
  let credential;
  try {
    credential = await navigator.credentials.get({ publicKey: {
      challenge: fromB64url(ask.challenge),
      rpId: ask.rp_id,
      allowCredentials: ask.credentials.map((id) => ({ type: "public-key", id: fromB64url(id) })),
      userVerification: "required",
      timeout: ask.timeout_ms,
    } });
  } catch (err) {
    return { failure: err && err.name === "SecurityError" ? "wrong_rp" : "cancelled" };
  }
  if (!credential) return { failure: "cancelled" };
  return { credential: {
    id: credential.id, rawId: b64url(credential.rawId), type: credential.type,
    response: {
      clientDataJSON: b64url(credential.response.clientDataJSON),
      authenticatorData: b64url(credential.response.authenticatorData),
      signature: b64url(credential.response.signature),
    },
  } };
}

export function bindPasskeys() {
  $("passkey-add").addEventListener("click", addPasskey);
}
