// The approve page: pair once, then show this user's waiting cards and send signed answers.
// Modules: device.js (key and signed requests), pairing.js, cards.js (one set on screen),
// voice.js (the Speak button), recorder.js (the microphone), teach.js and answers.js
// ("Teach my answers"), texts.js (what the page says), dom.js (helpers).

import { $, el, say } from "/approve/dom.js";
import { forgetDevice, loadDevice, now, postJson, session, signedFetch } from "/approve/device.js";
import { bindPairing } from "/approve/pairing.js";
import { buildSet, tick as tickSets } from "/approve/cards.js";
import { answerLines, cardLabels, setLabel, timeWords } from "/approve/texts.js";
import { speakButton } from "/approve/voice.js";
import { bindTeach, teachFor } from "/approve/teach.js";

const POLL_MS = 1500;
// Remembered in this browser: answers from here come from a switch interface.
const SWITCH_SETTING = "voicegate.switch";

const state = {
  sets: new Map(), // pending id -> latest set from the server
  // pending id -> a set no longer waiting: an answer still in flight when a poll drops its set
  // (the write ran meanwhile) is still named by what it was about
  gone: new Map(),
  suffix: new Map(), // pending id -> " (request k)" when another set has the same name
  expanded: new Map(), // pending id -> Set of card numbers whose whole text was shown
  answered: new Set(), // pending ids this page closed by its own answer
  warned: new Set(), // "id:deadline" already announced
  polling: null,
  ticker: null,
  serverVoice: true, // false once /device/pending says this server takes no spoken answers
};

// Whether this page offers Speak: a voice device, on a server that has a recogniser.
function speaks() {
  return Boolean(session.device) && session.device.kind === "voice" && state.serverVoice;
}

function showKind() {
  let kind = speaks() ? "tap and voice" : "tap only";
  if (session.device.kind === "voice" && !state.serverVoice) {
    kind = "tap only: this server takes no spoken answers";
  }
  $("device-line").textContent = `Answering for ${session.device.user} (${kind}).`;
  $("speak-help").hidden = !speaks();
  teachFor(speaks() ? session.device : null);
}

function nameOf(set) {
  return setLabel(set) + (state.suffix.get(set.id) || "");
}

// The name of what an answer was about: the card it chose, else its set.
function nameFor(pendingId, card) {
  const set = state.sets.get(pendingId) || state.gone.get(pendingId);
  if (!set) return "the request";
  if (card && set.cards.length > 1) return cardLabels(set.cards)[card - 1];
  return nameOf(set);
}

function expandedOf(id) {
  if (!state.expanded.has(id)) state.expanded.set(id, new Set());
  return state.expanded.get(id);
}

function showPairing(message = "") {
  stopPolling();
  session.device = null;
  $("pair-section").hidden = false;
  $("cards-section").hidden = true;
  $("receipts-box").hidden = true;
  $("forget").hidden = true;
  teachFor(null);
  $("device-line").textContent = "This device is not paired yet.";
  $("pair-error").textContent = message;
}

function showCards() {
  $("pair-section").hidden = true;
  $("cards-section").hidden = false;
  $("receipts-box").hidden = false;
  $("forget").hidden = false;
  showKind();
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
  if (!session.device || polling) return;
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
    const serverVoice = body.voice !== false;
    if (serverVoice !== state.serverVoice) {
      state.serverVoice = serverVoice;
      showKind();
    }
    render(body.sets);
  } catch (err) {
    $("device-line").textContent = "Cannot reach the server; retrying.";
  } finally {
    polling = false;
  }
}

function articleOf(id) {
  return $("sets").querySelector(`[data-pending-id="${CSS.escape(id)}"]`);
}

// Focus goes to the next card's Approve (else the one before), never to <main>.
function focusAfter(next, previous) {
  const live = (article) => (article && article.isConnected ? article.querySelector(".approve") : null);
  const target = live(next) || live(previous) || $("sets").querySelector(".approve");
  if (target) target.focus();
  else $("empty").focus();
}

function render(sets) {
  const container = $("sets");
  const seen = new Set();
  const news = [];
  let refocus = null; // [next, previous] around a removed set that held focus
  for (const set of sets) {
    seen.add(set.id);
    if (!state.sets.has(set.id)) {
      const label = setLabel(set);
      const twins = [...state.sets.values()].filter((s) => setLabel(s) === label).length;
      if (twins) state.suffix.set(set.id, ` (request ${twins + 1})`);
      news.push(set);
    }
    state.sets.set(set.id, set);
    const signature = `${set.stage}:${set.nonce}:${set.chosen}:${speaks()}`;
    let article = articleOf(set.id);
    if (!article || article.dataset.signature !== signature) {
      const fresh = buildArticle(set);
      fresh.dataset.signature = signature;
      if (article) {
        const hadFocus = article.contains(document.activeElement);
        article.replaceWith(fresh);
        if (hadFocus) fresh.querySelector(".approve").focus();
      } else {
        container.append(fresh);
      }
      article = fresh;
    }
    article.dataset.deadline = String(set.deadline);
  }
  for (const article of [...container.children]) {
    const id = article.dataset.pendingId;
    if (seen.has(id)) continue;
    const hadFocus = article.contains(document.activeElement);
    const next = article.nextElementSibling;
    const previous = article.previousElementSibling;
    const gone = state.sets.get(id);
    if (gone) state.gone.set(id, gone);
    state.sets.delete(id);
    article.remove();
    if (gone && !state.answered.has(id)) {
      say(now() >= gone.deadline
        ? `Time ran out for ${nameOf(gone)}. Nothing ran.`
        : `${nameOf(gone)} is no longer waiting: it was withdrawn, or answered on another device.`);
    }
    if (hadFocus) refocus = [next, previous];
  }
  for (const set of news) {
    say(`New request: ${nameOf(set)}. ${timeWords(set.deadline - now())} to answer.`);
  }
  $("empty").hidden = sets.length > 0;
  if (refocus) focusAfter(...refocus);
  tick();
}

function buildArticle(set) {
  const name = nameOf(set);
  const voice = speaks();
  return buildSet(set, {
    name,
    suffix: state.suffix.get(set.id) || "",
    expanded: expandedOf(set.id),
    approve: (number, event) => approve(set.id, number, event),
    expand: (number) => expandedOf(set.id).add(number),
    moreTime: () => moreTime(set.id),
    cancel: (event) => tapAnswer(set.id, "cancel", null, event),
    speak: voice ? speakButton(set.id, name, sendVoice, microphoneFailed) : null,
  });
}

function tick() {
  tickSets(now(), state.warned, (article, left) => {
    const set = state.sets.get(article.dataset.pendingId);
    const what = set ? nameOf(set) : "the waiting request";
    say(`About ${left} seconds left to answer ${what}. ` +
      "Press its More time button, or M, or say “more time”, if you need longer.");
  });
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

function approve(pendingId, number, event) {
  const set = state.sets.get(pendingId);
  if (!set) return;
  const card = set.cards[number - 1];
  // A yes applies only to what was on screen: a shortened card opens first.
  if (card.shortened && !expandedOf(pendingId).has(number)) {
    const item = articleOf(pendingId).querySelector(`li[data-card="${number}"]`);
    item.querySelector(".expand").click();
    // Shown where every answer's result is, so it is seen as well as heard (#result is a
    // polite live region itself, so it is not also said through #announce).
    const box = showResult([el("p", { class: "next-step" },
      "Part of this card was hidden. All of it is shown now: read it, then press Approve " +
      "again if it is right.")]);
    box.dataset.reason = "";
    box.dataset.released = "false";
    return;
  }
  if (set.stage === "final") tapAnswer(pendingId, "confirm", null, event);
  else tapAnswer(pendingId, "choose", number, event);
}

function settled(body) {
  if (body.pending_id && body.status && body.status !== "waiting") {
    state.answered.add(body.pending_id);
  }
}

async function tapAnswer(pendingId, decision, card, event) {
  const set = state.sets.get(pendingId);
  if (!set) return;
  const response = await postJson("/device/tap", {
    pending_id: pendingId, nonce: set.nonce, decision, card, input: inputOf(event),
    shown: [...expandedOf(pendingId)],
  });
  const body = await response.json();
  settled(body);
  showAnswer(body);
  poll();
}

async function moreTime(pendingId) {
  const name = nameFor(pendingId);
  const response = await postJson("/device/more-time", { pending_id: pendingId });
  const body = await response.json();
  if (!response.ok) {
    showRefusal(body);
    return;
  }
  moved(pendingId, body.deadline);
  const left = body.extensions_left;
  showResult([el("p", { class: "ok" },
    `More time for ${name}: ${timeWords(body.seconds_left)} left now.`),
  el("p", {}, `${left} more extension${left === 1 ? "" : "s"} left.`)]);
}

function moved(pendingId, deadline) {
  const set = state.sets.get(pendingId);
  if (set) state.sets.set(pendingId, { ...set, deadline });
  const article = articleOf(pendingId);
  if (article) article.dataset.deadline = String(deadline);
  tick();
}

function showAnswer(body) {
  const name = nameFor(body.pending_id, body.card);
  const parts = answerLines(body, name).map((line) => el("p", { class: line.cls || undefined },
    line.text, ...(line.heard !== undefined ? [el("q", { class: "heard" }, line.heard)] : [])));
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

async function loadReceipts() {
  if (!session.device) return;
  const response = await signedFetch("GET", "/device/receipts");
  if (!response.ok) return;
  const receipts = await response.json();
  $("receipts").replaceChildren(...receipts.slice(0, 10).map((r) => el("li", {},
    `${r.outcome}: ${r.card_text} (${r.modality || "?"}, ${r.id})`)));
}

// ---- voice --------------------------------------------------------------------------------

function microphoneFailed() {
  showResult([el("p", { class: "no" }, "The microphone is not available."),
    el("p", {}, "Allow the microphone for this page, or tap Approve instead.")]);
}

async function sendVoice(pendingId, blob) {
  const set = state.sets.get(pendingId);
  if (!set) return;
  if (!blob) {
    showResult([el("p", { class: "no" }, "Too short to hear. Nothing was sent."),
      el("p", {}, "Hold Speak while you say your answer, or press it once to start and once " +
        "to stop.")]);
    return;
  }
  showResult([el("p", {}, "Checking what you said…")]);
  const shown = [...expandedOf(pendingId)];
  // The signature covers the path and query: the server knows which full texts were shown.
  const path = shown.length ? `/device/voice?shown=${shown.join(",")}` : "/device/voice";
  const response = await signedFetch("POST", path, new Uint8Array(await blob.arrayBuffer()), {
    "Content-Type": blob.type || "audio/webm",
    "X-Voicegate-Pending": pendingId,
    "X-Voicegate-Nonce": set.nonce,
  });
  const body = await response.json();
  settled(body);
  if (body.pending_id) showAnswer(body);
  else showRefusal(body);
  if (body.decision === "more_time" && !body.reason) moved(pendingId, body.deadline);
  poll();
}

// ---- keys and start -----------------------------------------------------------------------

document.addEventListener("keydown", (event) => {
  const typing = event.target instanceof HTMLInputElement;
  if (typing || event.ctrlKey || event.metaKey || event.altKey || event.repeat) return;
  if (event.key !== "m" && event.key !== "M") return;
  // M is for the set that has focus, or the only one: never a set the user is not looking at.
  const inSet = event.target.closest && event.target.closest("[data-pending-id]");
  const only = state.sets.size === 1 ? [...state.sets.keys()][0] : null;
  const id = inSet ? inSet.dataset.pendingId : only;
  if (id) {
    event.preventDefault();
    moreTime(id);
  } else if (state.sets.size > 1) {
    event.preventDefault();
    say("Several requests are waiting: move to one, then press M, or use its More time button.");
  }
});

async function start() {
  bindPairing((user) => {
    showCards();
    say(`Paired. This device now answers for ${user}.`);
    $("cards-title").focus();
  });
  $("switch-mode").addEventListener("click", toggleSwitch);
  bindTeach();
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
    session.device = device;
    showCards();
  } else {
    showPairing();
  }
}

start();
