// The approve page: pair once, then show this user's waiting cards and send signed answers.
// The device's ECDSA P-256 private key is made here as non-extractable and kept in IndexedDB;
// the server only ever sees the public key. Every request to /device/* is signed.

const SCHEME = "voicegate-device-v2";
// The request headers the signature covers, in order: they pick the set and the audio decoder.
const COVERED = ["Content-Type", "X-Voicegate-Pending", "X-Voicegate-Nonce"];
const POLL_MS = 1500;
const WARN_SECONDS = 30; // the warning comes at least 20 s before the deadline, with room to act
const HOLD_MS = 600; // a press longer than this is hold-to-talk; shorter starts tap-to-record
const params = new URLSearchParams(location.search);
const MAX_RECORD_MS = clamp(Number(params.get("max_record_ms")) || 8000, 1000, 15000);
// Remembered in this browser: answers from here come from a switch interface.
const SWITCH_SETTING = "voicegate.switch";

const $ = (id) => document.getElementById(id);
const enc = new TextEncoder();

const state = {
  device: null, // {id, user, kind, keys: CryptoKeyPair}
  offset: 0, // server clock minus this device's clock, in seconds
  sets: new Map(), // pending id -> latest set from the server
  warned: new Set(), // "id:deadline" already announced
  recorder: null, // {pendingId, button, media, stream, pressedAt, timer, chunks, stopWanted}
  polling: null,
};

function clamp(x, lo, hi) {
  return Math.min(hi, Math.max(lo, x));
}

// ---- storage ------------------------------------------------------------------------------

function openDb() {
  return new Promise((resolve, reject) => {
    const req = indexedDB.open("voicegate", 1);
    req.onupgradeneeded = () => req.result.createObjectStore("device");
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

async function dbDo(mode, fn) {
  const db = await openDb();
  return new Promise((resolve, reject) => {
    const tx = db.transaction("device", mode);
    const req = fn(tx.objectStore("device"));
    tx.oncomplete = () => resolve(req ? req.result : undefined);
    tx.onerror = () => reject(tx.error);
  });
}

const loadDevice = () => dbDo("readonly", (s) => s.get("current"));
const saveDevice = (device) => dbDo("readwrite", (s) => s.put(device, "current"));
const forgetDevice = () => dbDo("readwrite", (s) => s.delete("current"));

// ---- signing ------------------------------------------------------------------------------

function b64url(bytes) {
  let text = "";
  for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function hex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

function syncClock(response) {
  const server = Number(response.headers.get("X-Voicegate-Time"));
  if (Number.isFinite(server) && server > 0) state.offset = server - Date.now() / 1000;
}

function coveredValue(headers, name) {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name.toLowerCase());
  return key === undefined ? "" : String(headers[key]);
}

async function signedFetch(method, path, body = null, headers = {}) {
  const bytes = body ?? new Uint8Array();
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const stamp = String(Math.floor(Date.now() / 1000 + state.offset));
    const digest = hex(await crypto.subtle.digest("SHA-256", bytes));
    const covered = COVERED.map((name) => coveredValue(headers, name));
    const message = [SCHEME, state.device.id, method, path, stamp, digest, ...covered].join("\n");
    const signature = await crypto.subtle.sign(
      { name: "ECDSA", hash: "SHA-256" }, state.device.keys.privateKey, enc.encode(message));
    const response = await fetch(path, {
      method,
      headers: {
        ...headers,
        "X-Voicegate-Device": state.device.id,
        "X-Voicegate-Timestamp": stamp,
        "X-Voicegate-Signature": b64url(signature),
      },
      body: method === "GET" ? undefined : bytes,
      cache: "no-store",
    });
    syncClock(response);
    // A device clock off by more than a minute: retry once on the server's clock.
    if (response.status === 401 && attempt === 0) {
      const copy = await response.clone().json().catch(() => ({}));
      if (copy.reason === "stale_request") continue;
    }
    return response;
  }
  throw new Error("unreachable");
}

async function postJson(path, value) {
  return signedFetch("POST", path, enc.encode(JSON.stringify(value)),
    { "Content-Type": "application/json" });
}

// ---- pairing ------------------------------------------------------------------------------

async function pair(event) {
  event.preventDefault();
  const code = $("pair-code").value.trim();
  const error = $("pair-error");
  error.textContent = "";
  if (!/^[0-9 -]{8,12}$/.test(code)) {
    error.textContent = "The code is 8 digits.";
    $("pair-code").focus();
    return;
  }
  $("pair-button").disabled = true;
  try {
    const keys = await crypto.subtle.generateKey(
      { name: "ECDSA", namedCurve: "P-256" }, false, ["sign", "verify"]);
    const jwk = await crypto.subtle.exportKey("jwk", keys.publicKey);
    const response = await fetch("/device/pair", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        code,
        name: $("pair-name").value.trim() || navigator.platform || "",
        public_key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y },
      }),
    });
    syncClock(response);
    const answer = await response.json();
    if (!response.ok) {
      error.textContent = answer.next_step || "Pairing failed.";
      $("pair-code").focus();
      return;
    }
    state.device = { id: answer.device_id, user: answer.user, kind: answer.kind, keys };
    await saveDevice(state.device);
    showCards();
    say(`Paired. This device now answers for ${answer.user}.`);
  } catch (err) {
    error.textContent = "Pairing failed: this page needs a secure address (https or localhost).";
  } finally {
    $("pair-button").disabled = false;
  }
}

function showPairing(message = "") {
  stopPolling();
  state.device = null;
  $("pair-section").hidden = false;
  $("cards-section").hidden = true;
  $("receipts-box").hidden = true;
  $("forget").hidden = true;
  $("device-line").textContent = "This device is not paired yet.";
  $("pair-error").textContent = message;
}

function showCards() {
  $("pair-section").hidden = true;
  $("cards-section").hidden = false;
  $("receipts-box").hidden = false;
  $("forget").hidden = false;
  const kind = state.device.kind === "voice" ? "tap and voice" : "tap only";
  $("device-line").textContent = `Answering for ${state.device.user} (${kind}).`;
  startPolling();
  loadReceipts();
}

// ---- polling and rendering ----------------------------------------------------------------

function startPolling() {
  stopPolling();
  poll();
  state.polling = setInterval(poll, POLL_MS);
  state.ticker = setInterval(tick, 1000);
}

function stopPolling() {
  clearInterval(state.polling);
  clearInterval(state.ticker);
}

let polling = false;
async function poll() {
  if (!state.device || polling) return;
  polling = true;
  try {
    const response = await signedFetch("GET", "/device/pending");
    const body = await response.json();
    if (!response.ok) {
      if (body.reason === "unknown_device" || body.reason === "device_revoked") {
        await forgetDevice();
        showPairing(body.next_step);
      }
      return;
    }
    render(body.sets);
  } catch (err) {
    $("device-line").textContent = "Cannot reach the server; retrying.";
  } finally {
    polling = false;
  }
}

function now() {
  return Date.now() / 1000 + state.offset;
}

function render(sets) {
  const container = $("sets");
  const seen = new Set();
  for (const set of sets) {
    seen.add(set.id);
    const old = state.sets.get(set.id);
    const signature = `${set.stage}:${set.nonce}:${set.chosen}`;
    let article = container.querySelector(`[data-pending-id="${CSS.escape(set.id)}"]`);
    if (!article || article.dataset.signature !== signature) {
      const fresh = buildSet(set);
      fresh.dataset.signature = signature;
      if (article) {
        const hadFocus = article.contains(document.activeElement);
        article.replaceWith(fresh);
        if (hadFocus) fresh.querySelector("button").focus();
      } else {
        container.append(fresh);
      }
      article = fresh;
    }
    if (!old || old.deadline !== set.deadline) article.dataset.deadline = String(set.deadline);
    state.sets.set(set.id, set);
  }
  for (const article of [...container.children]) {
    if (!seen.has(article.dataset.pendingId)) {
      const hadFocus = article.contains(document.activeElement);
      state.sets.delete(article.dataset.pendingId);
      article.remove();
      if (hadFocus) $("main").focus();
    }
  }
  $("empty").hidden = sets.length > 0;
  tick();
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  // textContent only: card text is the agent's words and must never become markup.
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

function buildSet(set) {
  const titleId = `title-${set.id}`;
  const countId = `count-${set.id}`;
  const final = set.stage === "final";
  const many = set.cards.length > 1;
  const title = final
    ? "Final check: do this?"
    : many ? `Choose one of ${set.cards.length}` : "Approve this?";
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
  const warnLine = el("p", { class: "warn-line" },
    "Time is nearly up. Press M or “More time” if you need longer.");
  warnLine.hidden = true;
  article.append(warnLine);

  const list = el("ol", { class: "cards", "aria-label": "Actions" });
  const shown = final ? set.cards.filter((c) => c.number === set.chosen) : set.cards;
  for (const card of shown) {
    const verb = final ? "Yes, do it" : many ? `Choose ${card.number}` : "Approve";
    const onpick = (event) => {
      if (final) tapAnswer(set.id, "confirm", null, event);
      else tapAnswer(set.id, "choose", card.number, event);
    };
    list.append(el("li", {},
      el("button", {
        type: "button",
        class: final ? "card chosen" : "card",
        "data-card": String(card.number),
        "aria-label": `${verb}: ${card.text}`,
        onclick: onpick,
      },
      el("span", { class: "num", "aria-hidden": "true" }, String(card.number)),
      el("span", { class: "text" }, card.text))));
  }
  article.append(list);

  const actions = el("div", { class: "actions" });
  if (final) {
    actions.append(el("button", {
      type: "button", class: "primary confirm",
      onclick: (event) => tapAnswer(set.id, "confirm", null, event),
    }, "Yes, do it"));
  }
  if (state.device.kind === "voice") {
    actions.append(speakButton(set.id));
  }
  actions.append(el("button", {
    type: "button", class: "more", "aria-keyshortcuts": "M",
    onclick: () => moreTime(set.id),
  }, "More time (M)"));
  actions.append(el("button", {
    type: "button", class: "danger cancel",
    onclick: (event) => tapAnswer(set.id, "cancel", null, event),
  }, "Cancel"));
  article.append(actions);
  return article;
}

function tick() {
  const t = now();
  for (const article of $("sets").children) {
    const deadline = Number(article.dataset.deadline);
    const left = Math.max(0, Math.round(deadline - t));
    const minutes = Math.floor(left / 60);
    const seconds = String(left % 60).padStart(2, "0");
    const count = article.querySelector("[data-countdown]");
    count.textContent = `${minutes}:${seconds} left`;
    count.setAttribute("aria-label", `${minutes} minutes ${seconds} seconds left`);
    const warning = left <= WARN_SECONDS;
    article.classList.toggle("warning", warning);
    article.querySelector(".warn-line").hidden = !warning || left === 0;
    const key = `${article.dataset.pendingId}:${deadline}`;
    if (warning && left > 0 && !state.warned.has(key)) {
      state.warned.add(key);
      const set = state.sets.get(article.dataset.pendingId);
      const what = set && set.cards.length === 1 ? set.cards[0].text : "the waiting request";
      say(`About ${left} seconds left to answer ${what}. ` +
        "Press M or the More time button, or say “more time”, if you need longer.");
    }
  }
}

// ---- answers ------------------------------------------------------------------------------

function inputOf(event) {
  // A switch interface presses Enter or Space, or taps, like anything else: only its user can
  // say that it is one (the "I use a switch" setting).
  if (usesSwitch()) return "switch";
  // A click with no pointer behind it came from Enter or Space.
  return event && event.detail === 0 ? "key" : "touch";
}

function usesSwitch() {
  try {
    return localStorage.getItem(SWITCH_SETTING) === "on";
  } catch (err) {
    return false; // storage blocked: the setting lasts only while the page is open
  }
}

function showSwitchSetting(on) {
  $("switch-mode").setAttribute("aria-pressed", String(on));
}

function toggleSwitch() {
  const on = $("switch-mode").getAttribute("aria-pressed") !== "true";
  try {
    if (on) localStorage.setItem(SWITCH_SETTING, "on");
    else localStorage.removeItem(SWITCH_SETTING);
  } catch (err) {
    // Storage blocked: the button still shows the choice for this visit.
  }
  showSwitchSetting(on);
  say(on ? "Answers will be recorded as switch presses." : "Switch setting off.");
}

async function tapAnswer(pendingId, decision, card, event) {
  const set = state.sets.get(pendingId);
  if (!set) return;
  const response = await postJson("/device/tap", {
    pending_id: pendingId, nonce: set.nonce, decision, card, input: inputOf(event),
  });
  showAnswer(await response.json());
  poll();
}

async function moreTime(pendingId) {
  const response = await postJson("/device/more-time", { pending_id: pendingId });
  const body = await response.json();
  if (!response.ok) {
    showRefusal(body);
    return;
  }
  const article = $("sets").querySelector(`[data-pending-id="${CSS.escape(pendingId)}"]`);
  if (article) article.dataset.deadline = String(body.deadline);
  state.sets.set(pendingId, body);
  tick();
  const minutes = Math.round(body.seconds_left / 60 * 10) / 10;
  say(`More time given: about ${minutes} minutes. ${body.extensions_left} more extensions left.`);
  showResult([el("p", { class: "ok" }, "More time given."),
    el("p", {}, `${Math.round(body.seconds_left)} seconds to decide.`)]);
}

function showAnswer(body) {
  const parts = [];
  if (body.heard && body.heard.length) {
    parts.push(el("p", {}, "Heard: ", el("q", { class: "heard" }, body.heard[0])));
  }
  if (body.released && !body.reason) {
    parts.push(el("p", { class: "ok" }, `Done: ${body.card_text}`));
    if (body.receipt_id) parts.push(el("p", { class: "muted" }, `Receipt ${body.receipt_id}`));
  } else if (body.decision === "more_time" && !body.reason) {
    parts.push(el("p", { class: "ok" }, "More time given."));
  } else if (body.decision === "cancel" && !body.reason) {
    parts.push(el("p", { class: "ok" }, "Cancelled. Nothing ran."));
  } else if (body.stage === "final" && !body.reason) {
    parts.push(el("p", { class: "ok" }, `Chosen: ${body.card_text}. Now confirm it.`));
  } else if (body.released) {
    parts.push(el("p", { class: "no" }, `Approved, but it failed: ${body.card_text}`));
    parts.push(el("p", {}, body.next_step));
  } else {
    parts.push(el("p", { class: "no" }, "Nothing ran."));
    if (body.next_step) parts.push(el("p", { class: "next-step" }, body.next_step));
  }
  const box = showResult(parts);
  box.dataset.reason = body.reason || "";
  box.dataset.released = String(Boolean(body.released));
}

function showRefusal(body) {
  const box = showResult([el("p", { class: "no" }, "Nothing ran."),
    el("p", { class: "next-step" }, body.next_step || "Please try again.")]);
  box.dataset.reason = body.reason || "";
  box.dataset.released = "false";
}

function showResult(parts) {
  const box = $("result");
  box.replaceChildren(...parts);
  loadReceipts();
  return box;
}

function say(text) {
  // Clearing first makes a repeated message be read again.
  const region = $("announce");
  region.textContent = "";
  setTimeout(() => { region.textContent = text; }, 50);
}

async function loadReceipts() {
  if (!state.device) return;
  const response = await signedFetch("GET", "/device/receipts");
  if (!response.ok) return;
  const receipts = await response.json();
  $("receipts").replaceChildren(...receipts.slice(0, 10).map((r) => el("li", {},
    `${r.outcome}: ${r.card_text} (${r.modality || "?"}, ${r.id})`)));
}

// ---- voice --------------------------------------------------------------------------------

function speakButton(pendingId) {
  const button = el("button", {
    type: "button", class: "speak", "aria-pressed": "false",
    "aria-label": "Speak your answer: press once to start and once to stop, or hold while talking",
  }, "Speak");
  let byPointer = false;
  button.addEventListener("pointerdown", (event) => {
    byPointer = true;
    event.preventDefault();
    if (state.recorder) stopRecording();
    else startRecording(pendingId, button);
  });
  button.addEventListener("pointerup", () => {
    const rec = state.recorder;
    if (rec && rec.pendingId === pendingId && performance.now() - rec.pressedAt > HOLD_MS) {
      stopRecording();
    }
  });
  button.addEventListener("click", () => {
    // Keyboards, switches and screen readers click without a pointer: toggle.
    if (byPointer) { byPointer = false; return; }
    if (state.recorder) stopRecording();
    else startRecording(pendingId, button);
  });
  return button;
}

async function startRecording(pendingId, button) {
  if (state.recorder) return;
  const rec = { pendingId, button, pressedAt: performance.now(), chunks: [] };
  state.recorder = rec;
  button.setAttribute("aria-pressed", "true");
  button.textContent = "Listening… press to stop";
  try {
    rec.stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: true },
    });
    const type = MediaRecorder.isTypeSupported("audio/webm;codecs=opus")
      ? "audio/webm;codecs=opus" : "";
    rec.media = new MediaRecorder(rec.stream, type ? { mimeType: type } : {});
    rec.media.ondataavailable = (event) => { if (event.data.size) rec.chunks.push(event.data); };
    rec.media.onstop = () => finishRecording(rec);
    rec.media.start();
    // Released (or pressed again) while the microphone was still starting: stop right away
    // rather than listen on until MAX_RECORD_MS.
    if (rec.stopWanted) {
      rec.media.stop();
      return;
    }
    rec.timer = setTimeout(stopRecording, MAX_RECORD_MS);
    say("Listening.");
  } catch (err) {
    state.recorder = null;
    resetSpeak(button);
    showResult([el("p", { class: "no" }, "The microphone is not available."),
      el("p", {}, "Allow the microphone for this page, or tap a card instead.")]);
  }
}

function stopRecording() {
  const rec = state.recorder;
  if (!rec) return;
  if (!rec.media) {
    rec.stopWanted = true; // the microphone is still starting; startRecording stops it
    return;
  }
  if (rec.media.state === "inactive") return;
  clearTimeout(rec.timer);
  rec.media.stop();
}

function resetSpeak(button) {
  button.setAttribute("aria-pressed", "false");
  button.textContent = "Speak";
}

async function finishRecording(rec) {
  rec.stream.getTracks().forEach((track) => track.stop());
  state.recorder = null;
  resetSpeak(rec.button);
  const blob = new Blob(rec.chunks, { type: rec.media.mimeType || "audio/webm" });
  const set = state.sets.get(rec.pendingId);
  if (!set) return;
  showResult([el("p", {}, "Checking what you said…")]);
  const response = await signedFetch("POST", "/device/voice",
    new Uint8Array(await blob.arrayBuffer()), {
      "Content-Type": blob.type || "audio/webm",
      "X-Voicegate-Pending": rec.pendingId,
      "X-Voicegate-Nonce": set.nonce,
    });
  const body = await response.json();
  if (body.pending_id) showAnswer(body);
  else showRefusal(body);
  if (body.decision === "more_time" && !body.reason) {
    const article = $("sets").querySelector(`[data-pending-id="${CSS.escape(rec.pendingId)}"]`);
    if (article) article.dataset.deadline = String(body.deadline);
    tick();
  }
  poll();
}

// ---- keys and start -----------------------------------------------------------------------

function mostUrgent() {
  let best = null;
  for (const set of state.sets.values()) {
    if (!best || set.deadline < best.deadline) best = set;
  }
  return best;
}

document.addEventListener("keydown", (event) => {
  const typing = event.target instanceof HTMLInputElement;
  if (typing || event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
  if (event.key === "m" || event.key === "M") {
    const inSet = event.target.closest && event.target.closest("[data-pending-id]");
    const id = inSet ? inSet.dataset.pendingId : mostUrgent()?.id;
    if (id) {
      event.preventDefault();
      moreTime(id);
    }
  }
});

async function start() {
  $("pair-form").addEventListener("submit", pair);
  $("switch-mode").addEventListener("click", toggleSwitch);
  showSwitchSetting(usesSwitch());
  $("forget").addEventListener("click", async () => {
    await forgetDevice();
    showPairing("This browser forgot its key. Ask the operator to revoke the device too.");
    $("pair-code").focus();
  });
  if (!window.isSecureContext || !crypto.subtle) {
    showPairing("This page needs a secure address (https, or localhost).");
    return;
  }
  const device = await loadDevice().catch(() => null);
  if (device && device.keys) {
    state.device = device;
    showCards();
  } else {
    showPairing();
  }
}

start();
