// The approve page: pair once, then show this user's waiting cards and send signed answers.
// Modules: device.js (key and signed requests), pairing.js, cards.js (one set on screen),
// outcome.js (results in their set, closed sets), voice.js (the Speak button), recorder.js
// (the microphone), teach.js and answers.js ("Teach my answers"), passkeys.js (passkeys and the
// passkey step), texts.js (what the page says), help.js ("How to answer"), forget.js, notify.js
// (notifications; sw.js is the service worker behind them), dom.js (helpers).

import { $, el, say } from "/approve/dom.js";
import {
  forgetDevice, loadDevice, now, postJson, session, signedFetch, syncTo,
} from "/approve/device.js";
import { bindPairing } from "/approve/pairing.js";
import { buildSet, tick as tickSets } from "/approve/cards.js";
import { closeSet, showIn } from "/approve/outcome.js";
import { answerLines, closedLine, timeWords } from "/approve/texts.js";
import { speakButton } from "/approve/voice.js";
import { bindTeach, teachFor } from "/approve/teach.js";
import { assertFor, bindPasskeys, loadPasskeys, showPasskeys } from "/approve/passkeys.js";
import { allStatus, settled as settledBatch, showAll } from "/approve/all.js";
import {
  anyGrants, grantAsked, grantChoice, grantLine, grantUses, loadGrants, showGrants,
} from "/approve/grants.js";
import { bindHelp, speakWords } from "/approve/help.js";
import { bindForget } from "/approve/forget.js";
import { bindNotify, offerNotifications } from "/approve/notify.js";

const POLL_MS = 1500;
// While a grant is listed, its uses left are asked for every this many polls (15 s).
const GRANT_POLLS = 10;
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
  polls: 0, // polls done, for the grants' occasional refresh
  serverVoice: true, // false once /device/pending says this server takes no spoken answers
  yesByVoice: true, // false where a yes is a tap only (Hindi on: the base model)
  // A set to open on (``?set=ID``, from a notification), and whether to make Speak ready.
  focusSet: new URLSearchParams(location.search).get("set"),
  focusVoice: new URLSearchParams(location.search).get("voice") === "1",
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
  speakWords(state.yesByVoice);
  teachFor(speaks() ? session.device : null);
}

function nameOf(set) {
  return set.name + (state.suffix.get(set.id) || "");
}

// The name of what an answer was about: the card it chose, else its set.
function nameFor(pendingId, card) {
  const set = state.sets.get(pendingId) || state.gone.get(pendingId);
  if (!set) return "the request";
  if (card && set.cards.length > 1) return set.cards[card - 1].label;
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
  showPasskeys(false);
  showGrants(false);
  $("notify-box").hidden = true;
  $("paired-line").textContent = "";
  teachFor(null);
  $("device-line").textContent = "This device is not paired yet.";
  $("pair-error").textContent = message;
}

function showCards() {
  $("pair-section").hidden = true;
  $("cards-section").hidden = false;
  $("receipts-box").hidden = false;
  $("forget").hidden = false;
  showPasskeys(true);
  showGrants(true);
  showKind();
  offerNotifications();
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
    syncTo(body.server_time);
    const serverVoice = body.voice !== false;
    const yesByVoice = serverVoice && body.yes_by_voice !== false;
    if (serverVoice !== state.serverVoice || yesByVoice !== state.yesByVoice) {
      state.serverVoice = serverVoice;
      state.yesByVoice = yesByVoice;
      showKind();
    }
    render(body.sets);
    state.polls += 1;
    if (anyGrants() && state.polls % GRANT_POLLS === 0) loadGrants();
  } catch (err) {
    $("device-line").textContent = "Cannot reach the server; retrying.";
  } finally {
    polling = false;
  }
}

function articleOf(id) {
  return $("sets").querySelector(`[data-pending-id="${CSS.escape(id)}"]`);
}

// The open sets on the page (closed ones stay a while, to show what happened).
const openArticles = () => [...$("sets").querySelectorAll("article.set:not(.closed)")];

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
      const twins = [...state.sets.values()].filter((s) => s.name === set.name).length;
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
        // The result region stays the same node, so what it says now is not lost or re-read.
        fresh.querySelector(".set-result").replaceWith(article.querySelector(".set-result"));
        article.replaceWith(fresh);
        if (hadFocus) fresh.querySelector(".approve").focus();
      } else {
        // New sets come before the closed ones kept below them.
        container.insertBefore(fresh, container.querySelector("article.closed"));
      }
      article = fresh;
    }
    article.dataset.deadline = String(set.deadline);
  }
  for (const article of openArticles()) {
    const id = article.dataset.pendingId;
    if (seen.has(id)) continue;
    const hadFocus = article.contains(document.activeElement);
    const next = article.nextElementSibling;
    const previous = article.previousElementSibling;
    const gone = state.sets.get(id);
    if (gone) state.gone.set(id, gone);
    state.sets.delete(id);
    closeSet(article, gone ? nameOf(gone) : "the request", null, () => focusAfter(null, null));
    if (gone && !state.answered.has(id)) whyClosed(article, gone);
    if (hadFocus) refocus = [next, previous];
  }
  for (const set of news) {
    say(`New request: ${nameOf(set)}. ${timeWords(set.deadline - now())} to answer.`);
  }
  $("empty").hidden = sets.length > 0;
  showAll(sets);
  if (refocus) focusAfter(...refocus);
  focusAsked();
  tick();
}

// A set closed without this page's answer: the server says why (its time ran out, the agent
// took it back, another device answered), shown in the set and read out.
async function whyClosed(article, gone) {
  let status = now() >= gone.deadline ? "expired" : "";
  try {
    const response = await signedFetch("GET", `/device/sets/${encodeURIComponent(gone.id)}`);
    if (response.ok) status = (await response.json()).status;
  } catch (err) {
    // Unreachable: the deadline says whether the time ran out; otherwise "no longer waiting".
  }
  const line = closedLine(status, nameOf(gone));
  showIn(article, [line]);
}

// Opened from a notification (``?set=ID``, ``&voice=1``): focus goes to that set's Speak
// when voice was asked for, else to its Approve; once.
function focusAsked() {
  if (!state.focusSet) return;
  const article = articleOf(state.focusSet);
  if (!article || article.classList.contains("closed")) return;
  const target = (state.focusVoice && article.querySelector(".speak")) ||
    article.querySelector(".approve");
  state.focusSet = null;
  if (!target) return;
  target.scrollIntoView({ block: "center" });
  target.focus();
  if (state.focusVoice && target.classList.contains("speak")) {
    showIn(article, [{ cls: "", text: "Press Speak, then say your answer." }]);
  }
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
    speak: voice ? speakButton(set.id, name, sendVoice, () => microphoneFailed(set.id)) : null,
    grant: grantChoice(set, name),
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
    // Shown in the set, beside the button pressed, so it is seen as well as heard (the set's
    // result region is a polite live region itself, so it is not also said through #announce).
    showIn(articleOf(pendingId), [{ cls: "next-step", text:
      "Part of this card was hidden. All of it is shown now: read it, then press Approve " +
      "again if it is right." }]);
    return;
  }
  if (set.stage === "passkey") passkeyAnswer(pendingId, event);
  else if (set.stage === "final") tapAnswer(pendingId, "confirm", null, event);
  else tapAnswer(pendingId, "choose", number, event);
}

// The passkey step: the browser's prompt, then the assertion (or why there is none) as a
// signed answer; the server checks it against the set, the step's nonce and the action.
async function passkeyAnswer(pendingId, event) {
  const set = state.sets.get(pendingId);
  if (!set) return;
  const input = inputOf(event);
  showResult(pendingId, [{ cls: "", text: "Confirm with your passkey: follow your phone's prompt." }]);
  const made = await assertFor(set);
  const response = await postJson("/device/passkey", {
    pending_id: pendingId, nonce: set.nonce, input, shown: [...expandedOf(pendingId)], ...made,
  });
  const body = await response.json();
  settled(body);
  if (body.pending_id) showAnswer(body);
  else showRefusal(pendingId, body);
  if (body.reason === "no_passkey") loadPasskeys();
  poll();
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
    grant: decision === "cancel" ? undefined : grantAsked(pendingId),
  });
  const body = await response.json();
  settled(body);
  showAnswer(body);
  poll();
}

// "Approve all N": one signed answer for each waiting single card; each set shows its own result.
async function approveAll(event) {
  const ready = settledBatch(state.sets.values());
  if (ready === null) {
    allStatus("The cards just changed. Read them, then press again.");
    return;
  }
  if (ready.length < 2) return;
  // A yes applies only to what was on screen: cards cut for display open first.
  const cut = ready.filter((set) => set.cards[0].shortened && !expandedOf(set.id).has(1));
  if (cut.length) {
    for (const set of cut) articleOf(set.id).querySelector("li[data-card=\"1\"] .expand").click();
    allStatus("Some cards were cut short. All of each is shown now: read them, then press " +
      "Approve all again.");
    return;
  }
  allStatus("");
  const response = await postJson("/device/approve-all", {
    input: inputOf(event),
    sets: ready.map((set) => ({ pending_id: set.id, nonce: set.nonce,
      shown: [...expandedOf(set.id)] })),
  });
  const body = await response.json();
  if (!response.ok) {
    // A refusal of the whole answer (4xx) comes before anything runs; a server fault (5xx) may
    // come after some sets were released, so each card is looked at again.
    const said = body.next_step || "Please try again.";
    allStatus(response.status >= 500
      ? `The server stopped part way: some may have run. Each card shows where it stands. ${said}`
      : `Nothing ran. ${said}`);
    poll();
    return;
  }
  for (const answer of body.answers) {
    settled(answer);
    showAnswer(answer);
  }
  const done = body.answers.filter((a) => a.released).length;
  allStatus(`Approved ${done} of ${body.answers.length}.`);
  say(`Approved ${done} of ${body.answers.length}.`);
  poll();
}

async function moreTime(pendingId) {
  const name = nameFor(pendingId);
  const response = await postJson("/device/more-time", { pending_id: pendingId });
  const body = await response.json();
  if (!response.ok) {
    showRefusal(pendingId, body);
    return;
  }
  moved(pendingId, body.deadline);
  const left = body.extensions_left;
  showResult(pendingId, [{ cls: "ok",
    text: `More time for ${name}: ${timeWords(body.seconds_left)} left now.` },
  { cls: "", text: `${left} more extension${left === 1 ? "" : "s"} left.` }]);
  loadReceipts();
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
  const lines = answerLines(body, name, state.yesByVoice);
  if (body.grant) lines.push(grantLine(body.grant));
  showResult(body.pending_id, lines, body);
}

function showRefusal(pendingId, body) {
  showResult(pendingId, [{ cls: "no", text: "Nothing ran." },
    { cls: "next-step", text: body.next_step || "Please try again." }], body);
}

// ``lines`` in the set ``pendingId``'s own result region (texts.js's shape).
function showResult(pendingId, lines, body = {}) {
  const article = articleOf(pendingId);
  if (article) {
    showIn(article, lines, { reason: body.reason || "", released: Boolean(body.released) });
  } else {
    say(lines.map((line) => line.text + (line.heard || "")).join(" "));
  }
  loadReceipts();
}

async function loadReceipts() {
  if (!session.device) return;
  loadGrants();
  const response = await signedFetch("GET", "/device/receipts");
  if (!response.ok) return;
  const receipts = await response.json();
  $("receipts").replaceChildren(...receipts.slice(0, 10).map((r) => el("li", {},
    `${r.outcome}: ${r.card_text} (${r.modality || "?"}, ${r.id})`)));
}

// ---- voice --------------------------------------------------------------------------------

function microphoneFailed(pendingId) {
  showResult(pendingId, [{ cls: "no", text: "The microphone is not available." },
    { cls: "", text: "Allow the microphone for this page, or tap Approve instead." }]);
}

async function sendVoice(pendingId, blob) {
  const set = state.sets.get(pendingId);
  if (!set) return;
  if (!blob) {
    showResult(pendingId, [{ cls: "no", text: "Too short to hear. Nothing was sent." },
      { cls: "", text: "Hold Speak while you say your answer, or press it once to start and " +
        "once to stop." }]);
    return;
  }
  showResult(pendingId, [{ cls: "", text: "Checking what you said…" }]);
  const shown = [...expandedOf(pendingId)];
  // The signature covers the path and query: the server knows which full texts were shown, and
  // how many times a spoken "yes, for ten minutes" allows the same (this card's count).
  const query = [];
  if (shown.length) query.push(`shown=${shown.join(",")}`);
  const uses = grantUses(pendingId);
  if (uses) query.push(`grant_uses=${uses}`);
  const path = query.length ? `/device/voice?${query.join("&")}` : "/device/voice";
  const response = await signedFetch("POST", path, new Uint8Array(await blob.arrayBuffer()), {
    "Content-Type": blob.type || "audio/webm",
    "X-Voicegate-Pending": pendingId,
    "X-Voicegate-Nonce": set.nonce,
  });
  const body = await response.json();
  settled(body);
  if (body.pending_id) showAnswer(body);
  else showRefusal(pendingId, body);
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
    // Seen and heard (the line is a status region): pairing worked.
    $("paired-line").textContent = `Paired. This device now answers for ${user}.`;
    $("cards-title").focus();
  });
  $("switch-mode").addEventListener("click", toggleSwitch);
  $("approve-all").addEventListener("click", approveAll);
  bindTeach();
  bindPasskeys();
  bindHelp();
  bindNotify();
  showSwitchSetting(usesSwitch());
  bindForget(async () => {
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
