// "Teach my answers": the user records each answer three times, in their own word if they
// like. Each take is uploaded signed exactly as an answer is (device.js); the server keeps its
// features, never the audio. The recordings stay in this page, to be played back, until it is
// left. Every control is a button in reading order; progress is read out by #teach-status.

import { $, el } from "/approve/dom.js";
import { postJson, signedFetch } from "/approve/device.js";
import { pressToRecord, recording, start, stop } from "/approve/recorder.js";
import {
  answerName, cleanLabel, countsNote, groups, meaningName, progressTitle, savedLine, soundsLike,
  takeCount, takesOf,
} from "/approve/answers.js";

const view = {
  data: { templates: [], hard: false, meanings: [], takes_per_answer: 3 },
  meaning: null, // the answer picked to teach
  redo: null, // {id, number, at}: the take the next recording replaces
  saving: false,
  local: new Map(), // take id -> blob: URL of its recording, made on this page
  places: new Map(), // id of a take recorded again -> the time of the take it replaced
};

const wanted = () => view.data.takes_per_answer || 3;
const label = () => cleanLabel($("teach-label").value);
const picked = () => takesOf(view.data, view.meaning, label(), view.places);
const ours = () => Boolean(recording() && recording().owner.teach);

let said = null;
function status(text) {
  // Cleared first, so that the same words said twice are read twice.
  const region = $("teach-status");
  region.textContent = "";
  clearTimeout(said);
  said = setTimeout(() => { region.textContent = text; }, 50);
}

// ---- the view -----------------------------------------------------------------------------

export function bindTeach() {
  $("teach-open").addEventListener("click", () => ($("teach-section").hidden ? open() : close()));
  $("teach-close").addEventListener("click", () => close());
  $("hard-mode").addEventListener("click", toggleHard);
  $("teach-label").addEventListener("input", () => {
    view.redo = null;
    renderCurrent();
  });
  pressToRecord($("teach-record"), toggleRecord, ours, () => {
    const record = $("teach-record");
    record.textContent = "Listening… let go to stop";
    record.setAttribute("aria-label", record.getAttribute("aria-label")
      .replace("Listening… press to stop", "Listening… let go to stop"));
  });
}

// Shown to a paired voice device; tap-only devices cannot teach (the server refuses them).
export function teachFor(device) {
  const voice = Boolean(device) && device.kind === "voice";
  $("teach-entry").hidden = !voice;
  if (!voice) close(false);
}

async function open() {
  $("teach-section").hidden = false;
  $("teach-open").setAttribute("aria-expanded", "true");
  $("teach-title").focus();
  await load();
}

function close(refocus = true) {
  const rec = recording();
  if (rec && rec.owner.teach) {
    rec.owner.discard = true; // closing throws the take away rather than teach it
    stop();
  }
  $("teach-section").hidden = true;
  $("teach-open").setAttribute("aria-expanded", "false");
  status(""); // what it said is about this visit: reopened, the view starts clean
  if (refocus) $("teach-open").focus();
}

async function load() {
  try {
    const response = await signedFetch("GET", "/device/enrol");
    const body = await response.json();
    if (!response.ok) {
      status(`Your taught answers could not be loaded. ${body.next_step || ""}`);
      return;
    }
    view.data = body;
    render();
  } catch (err) {
    status("Cannot reach the server; try again.");
  }
}

function render() {
  renderPick();
  renderCurrent();
  renderTaught();
  $("hard-mode").setAttribute("aria-pressed", String(Boolean(view.data.hard)));
}

function renderPick() {
  const box = $("teach-pick");
  if (!box.children.length) {
    box.append(...view.data.meanings.map((meaning) => el("button", {
      type: "button", class: "pick-one", "data-meaning": meaning, "aria-pressed": "false",
      onclick: () => pick(meaning),
    }, meaningName(meaning))));
  }
  for (const button of box.children) {
    button.setAttribute("aria-pressed", String(button.dataset.meaning === view.meaning));
  }
}

function renderCurrent() {
  $("teach-current").hidden = !view.meaning;
  if (!view.meaning) return;
  const name = answerName(view.meaning, label());
  const takes = picked();
  $("take-title").textContent = progressTitle(name, takes.length, wanted());
  const record = $("teach-record");
  record.hidden = takes.length >= wanted() && !view.redo && !ours();
  if (!ours()) {
    const text = view.redo
      ? `Record take ${view.redo.number} again`
      : `Record take ${Math.min(takes.length + 1, wanted())} of ${wanted()}`;
    record.textContent = text;
    record.setAttribute("aria-label", `${text} for ${name}`);
    record.setAttribute("aria-pressed", "false");
  }
  $("takes").replaceChildren(...takes.map((take, i) => takeItem(take, i + 1, name)));
}

function takeItem(take, number, name) {
  const url = view.local.get(take.id);
  const item = el("li", { class: "take", "data-take": take.id },
    el("span", {}, `Take ${number}`,
      url ? "" : el("span", { class: "muted" }, " (recorded earlier; not kept here to play)")));
  const buttons = el("div", { class: "take-actions" });
  if (url) {
    buttons.append(el("button", {
      type: "button", class: "play", "aria-label": `Play take ${number} of ${name}`,
      onclick: () => play(url, number, name),
    }, "Play"));
  }
  buttons.append(el("button", {
    type: "button", class: "redo", "aria-label": `Redo take ${number} of ${name}`,
    onclick: () => redo(take, number),
  }, "Redo"));
  buttons.append(el("button", {
    type: "button", class: "danger delete-take", "aria-label": `Delete take ${number} of ${name}`,
    onclick: () => deleteTake(take, number, name),
  }, "Delete"));
  item.append(buttons);
  return item;
}

function renderTaught() {
  const list = groups(view.data, view.places);
  $("taught-empty").hidden = list.length > 0;
  const note = countsNote(view.data);
  $("taught-note").textContent = note;
  $("taught-note").hidden = !note;
  $("taught").replaceChildren(...list.map((group) => {
    const name = answerName(group.meaning, group.label);
    const done = group.takes.length;
    // Takes taught under another recogniser count for nothing until taught again.
    const stale = group.takes.some((take) => take.current === false)
      ? " (taught for another recogniser: delete and teach again)" : "";
    const item = el("li", { class: "taught-one", "data-key": `${group.meaning}\n${group.label}` },
      el("span", {}, `${name}: ${done >= wanted() ? takeCount(done) : `${done} of ${wanted()} takes`}${stale}`));
    const buttons = el("div", { class: "take-actions" });
    if (done < wanted()) {
      buttons.append(el("button", {
        type: "button", class: "resume", "aria-label": `Teach more of ${name}`,
        onclick: () => resume(group),
      }, "Teach more"));
    }
    buttons.append(el("button", {
      type: "button", class: "danger delete-answer", "aria-label": `Delete ${name}`,
      onclick: (event) => pressTwice(event.currentTarget, name, done,
        () => deleteAnswer(group, name, item)),
    }, "Delete"));
    item.append(buttons);
    return item;
  }));
}

// Focus that sat on a control now hidden or gone goes to the heading of the takes.
function keepFocus() {
  const at = document.activeElement;
  if (!at || at === document.body || at.closest("[hidden]")) $("take-title").focus();
}

// ---- actions ------------------------------------------------------------------------------

function pick(meaning) {
  view.meaning = meaning;
  view.redo = null;
  render();
  const name = answerName(meaning, label());
  const done = picked().length;
  status(done >= wanted()
    ? `${name} is taught: ${takeCount(done)}. You may play, redo or delete a take.`
    : `${name}: take ${done + 1} of ${wanted()}. Press Record, say it, then press Record again.`);
}

function resume(group) {
  $("teach-label").value = group.label;
  pick(group.meaning);
  $("teach-record").focus();
}

function toggleRecord() {
  if (recording()) {
    stop();
    return;
  }
  if (view.saving) {
    status("Still saving the last take; press Record again in a moment.");
    return;
  }
  if (!view.meaning) return;
  const take = { teach: true, meaning: view.meaning, label: label(), redo: view.redo };
  const name = answerName(take.meaning, take.label);
  if (!start(take, (blob) => finished(take, blob), () => micFailed())) return;
  const record = $("teach-record");
  record.hidden = false;
  record.setAttribute("aria-pressed", "true");
  record.textContent = "Listening… press to stop";
  record.setAttribute("aria-label", `Listening… press to stop, for ${name}`);
}

function micFailed() {
  renderCurrent();
  status("The microphone is not available. Allow the microphone for this page, then press " +
    "Record again.");
}

async function finished(take, blob) {
  if (take.discard) {
    renderCurrent();
    return;
  }
  if (!blob) {
    renderCurrent();
    status("Too short to keep: hold Record while you say the answer, or press it once to " +
      "start and once to stop.");
    keepFocus();
    return;
  }
  view.saving = true;
  renderCurrent();
  const name = answerName(take.meaning, take.label);
  status(`Saving ${name}…`);
  try {
    const query = `meaning=${encodeURIComponent(take.meaning)}` +
      (take.label ? `&label=${encodeURIComponent(take.label)}` : "");
    // Signed like an answer: the path and query (meaning, label) and the body's digest.
    const response = await signedFetch("POST", `/device/enrol/voice?${query}`,
      new Uint8Array(await blob.arrayBuffer()), { "Content-Type": blob.type || "audio/webm" });
    const body = await response.json();
    view.redo = null;
    if (!response.ok) {
      await load();
      status(`Not saved: ${body.next_step || "please try again."}`);
      return;
    }
    view.local.set(body.id, URL.createObjectURL(blob));
    $("teach-label").value = take.label; // as stored: ends trimmed, inner spaces folded
    if (take.redo) {
      view.places.set(body.id, take.redo.at);
      await forget(take.redo.id);
    }
    await load();
    const done = takesOf(view.data, take.meaning, take.label, view.places).length;
    const number = (take.redo && take.redo.number) || done;
    const warning = soundsLike(take.meaning, body.heard, body.heard_as, name, number);
    const saved = savedLine(name, done, wanted(), take.redo && take.redo.number);
    status(warning ? `${warning} ${saved}` : saved);
  } catch (err) {
    status("Cannot reach the server; the take was not saved. Press Record to try again.");
  } finally {
    view.saving = false;
    keepFocus();
  }
}

function play(url, number, name) {
  const player = $("teach-player");
  player.src = url;
  player.onended = () => status(`Take ${number} of ${name} played.`);
  status(`Playing take ${number} of ${name}.`);
  player.play().catch((err) => {
    // Another Play pressed before this one started is no failure.
    if (err.name !== "AbortError") status("This browser could not play the take.");
  });
}

function redo(take, number) {
  if (recording() || view.saving) {
    status("Finish the recording in progress first.");
    return;
  }
  view.redo = { id: take.id, number, at: view.places.get(take.id) ?? take.created_at };
  renderCurrent();
  $("teach-record").focus();
  toggleRecord();
}

// Forgets one take on the server, and its recording here; false (and says why) on a refusal.
async function forget(id) {
  const response = await signedFetch("DELETE", `/device/enrol/${encodeURIComponent(id)}`);
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    // Already gone (deleted from another device) is what was asked for.
    if (body.reason !== "unknown_template") {
      status(`Not deleted: ${body.next_step || "please try again."}`);
      return false;
    }
  }
  const url = view.local.get(id);
  if (url) URL.revokeObjectURL(url);
  view.local.delete(id);
  view.places.delete(id);
  if (view.redo && view.redo.id === id) view.redo = null;
  return true;
}

async function deleteTake(take, number, name) {
  if (!(await forget(take.id))) return;
  await load();
  const left = takesOf(view.data, take.meaning, take.label, view.places).length;
  status(`Take ${number} of ${name} deleted. ${name} now has ${left} of ${wanted()} takes.`);
  if (view.meaning === take.meaning && label() === take.label) $("teach-record").focus();
  keepFocus();
}

// Deleting a whole answer throws away several takes of effort, so it takes a second press:
// the first arms the button (its name and the status line say so), which disarms by itself
// after ARM_MS or when focus leaves it. One control, no dialog: a switch or a keyboard presses
// it twice as easily as once.
const ARM_MS = 8000;

function pressTwice(button, name, takes, act) {
  if (button.dataset.armed === "1") {
    act();
    return;
  }
  const disarm = () => {
    if (button.dataset.armed !== "1") return;
    button.dataset.armed = "";
    button.textContent = "Delete";
    button.setAttribute("aria-label", `Delete ${name}`);
  };
  button.dataset.armed = "1";
  button.textContent = "Press again to delete";
  button.setAttribute("aria-label", `Press again to delete ${name}, ${takeCount(takes)}`);
  status(`Press Delete again to forget ${name}: ${takeCount(takes)}, which cannot be undone.`);
  setTimeout(disarm, ARM_MS);
  button.addEventListener("blur", disarm, { once: true });
}

async function deleteAnswer(group, name, item) {
  // Focus goes to the answer after this one (else the one before), never to the page top.
  const near = [item.nextElementSibling, item.previousElementSibling]
    .filter(Boolean).map((node) => node.dataset.key);
  for (const take of group.takes) {
    if (!(await forget(take.id))) {
      await load();
      return;
    }
  }
  await load();
  status(`${name} deleted: ${takeCount(group.takes.length)} forgotten.`);
  const rows = [...$("taught").children];
  const target = near.map((key) => rows.find((row) => row.dataset.key === key)).find(Boolean);
  if (target) target.querySelector(".delete-answer").focus();
  else $("taught-empty").focus();
}

async function toggleHard() {
  const hard = !view.data.hard;
  const response = await postJson("/device/enrol/hard", { hard });
  const body = await response.json();
  if (!response.ok) {
    status(`Not saved: ${body.next_step || "please try again."}`);
    return;
  }
  view.data = body;
  render();
  status(hard
    ? "Saved: your speech is marked as hard for recognisers."
    : "Saved: your speech is no longer marked as hard for recognisers.");
}
