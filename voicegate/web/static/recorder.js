// The microphone, one recording at a time for the whole page: the Speak buttons of the cards
// and the Record button of "Teach my answers" share it. A button records while held, or from
// one press to the next, so a keyboard, a switch or a screen reader needs no holding at all.

import { say } from "/approve/dom.js";

const HOLD_MS = 600; // a press longer than this is hold-to-talk; shorter starts press-to-record
const params = new URLSearchParams(location.search);
// A recording stops by itself after this long; a press stops it sooner. Nothing is lost when it
// does: the user hears what was kept, and may record again.
export const MAX_RECORD_MS =
  Math.min(15000, Math.max(1000, Number(params.get("max_record_ms")) || 8000));

// Shorter than this from the microphone's start, a recording holds no answer (a double press,
// a switch that bounced): ``done`` gets null and the page says so, rather than sending bytes
// the server can only call unreadable or silent.
export const MIN_RECORD_MS = 300;

// {owner, done(blob or null), media, stream, pressedAt, startedAt, timer, chunks, stopWanted}
let active = null;

export const recording = () => active;

// Starts recording for ``owner`` (any value the caller recognises). ``done(blob)`` gets the
// recording (null when it was too short to hold an answer); ``failed()`` is called when the microphone cannot start. False when busy.
export function start(owner, done, failed) {
  if (active) return false;
  const rec = { owner, done, pressedAt: performance.now(), chunks: [] };
  active = rec;
  open(rec, failed);
  return true;
}

async function open(rec, failed) {
  try {
    rec.stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: true },
    });
    const type = MediaRecorder.isTypeSupported("audio/webm;codecs=opus")
      ? "audio/webm;codecs=opus" : "";
    rec.media = new MediaRecorder(rec.stream, type ? { mimeType: type } : {});
    rec.media.ondataavailable = (event) => { if (event.data.size) rec.chunks.push(event.data); };
    rec.media.onstop = () => finish(rec);
    rec.media.start();
    rec.startedAt = performance.now();
    // Released (or pressed again) while the microphone was still starting: stop right away
    // rather than listen on until MAX_RECORD_MS.
    if (rec.stopWanted) {
      rec.media.stop();
      return;
    }
    rec.timer = setTimeout(stop, MAX_RECORD_MS);
    say("Listening.");
  } catch (err) {
    if (rec.stream) rec.stream.getTracks().forEach((track) => track.stop());
    active = null;
    failed();
  }
}

export function stop() {
  const rec = active;
  if (!rec) return;
  if (!rec.media) {
    rec.stopWanted = true; // the microphone is still starting; open() stops it
    return;
  }
  if (rec.media.state === "inactive") return;
  clearTimeout(rec.timer);
  rec.media.stop();
}

function finish(rec) {
  rec.stream.getTracks().forEach((track) => track.stop());
  active = null;
  const held = rec.startedAt ? performance.now() - rec.startedAt : 0;
  rec.done(held < MIN_RECORD_MS || !rec.chunks.length
    ? null : new Blob(rec.chunks, { type: rec.media.mimeType || "audio/webm" }));
}

// Hold-to-talk or press-to-record on ``button``: ``toggle()`` starts or stops; ``mine()`` says
// whether the recording now running is this button's, so a long hold stops it on release;
// ``held()`` is called once a press has lasted long enough to be a hold (the button then says
// to let go, not to press again).
export function pressToRecord(button, toggle, mine, held = () => {}) {
  let byPointer = false;
  let holding = null;
  button.addEventListener("pointerdown", (event) => {
    byPointer = true;
    event.preventDefault();
    toggle();
    clearTimeout(holding);
    holding = setTimeout(() => { if (active && mine()) held(); }, HOLD_MS);
  });
  const release = () => {
    clearTimeout(holding);
    if (active && mine() && performance.now() - active.pressedAt > HOLD_MS) stop();
  };
  button.addEventListener("pointerup", release);
  button.addEventListener("pointercancel", release);
  button.addEventListener("click", () => {
    // Keyboards, switches and screen readers click without a pointer: toggle.
    if (byPointer) { byPointer = false; return; }
    toggle();
  });
}
