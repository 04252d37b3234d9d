// The Speak button: hold to talk, or press once to start and once to stop. The recording goes
// to ``send(pendingId, blob)``; a microphone that cannot start goes to ``failed()``.

import { el, say } from "/approve/dom.js";

const HOLD_MS = 600; // a press longer than this is hold-to-talk; shorter starts tap-to-record
const params = new URLSearchParams(location.search);
const MAX_RECORD_MS = Math.min(15000, Math.max(1000, Number(params.get("max_record_ms")) || 8000));

// {pendingId, button, media, stream, pressedAt, timer, chunks, stopWanted, send}
let recorder = null;

export function speakButton(pendingId, name, send, failed) {
  const button = el("button", {
    type: "button", class: "speak", "aria-pressed": "false",
    "aria-label": `Speak your answer for ${name}`,
    "aria-describedby": "speak-help",
  }, "Speak");
  let byPointer = false;
  const toggle = () => {
    if (recorder) stopRecording();
    else startRecording(pendingId, name, button, send, failed);
  };
  button.addEventListener("pointerdown", (event) => {
    byPointer = true;
    event.preventDefault();
    toggle();
  });
  button.addEventListener("pointerup", () => {
    const rec = recorder;
    if (rec && rec.pendingId === pendingId && performance.now() - rec.pressedAt > HOLD_MS) {
      stopRecording();
    }
  });
  button.addEventListener("click", () => {
    // Keyboards, switches and screen readers click without a pointer: toggle.
    if (byPointer) { byPointer = false; return; }
    toggle();
  });
  return button;
}

async function startRecording(pendingId, name, button, send, failed) {
  if (recorder) return;
  const rec = { pendingId, name, button, send, pressedAt: performance.now(), chunks: [] };
  recorder = rec;
  button.setAttribute("aria-pressed", "true");
  button.textContent = "Listening… press to stop";
  // The accessible name starts with the visible words (WCAG 2.5.3).
  button.setAttribute("aria-label", `Listening… press to stop, for ${name}`);
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
    recorder = null;
    resetSpeak(button, name);
    failed();
  }
}

function stopRecording() {
  const rec = recorder;
  if (!rec) return;
  if (!rec.media) {
    rec.stopWanted = true; // the microphone is still starting; startRecording stops it
    return;
  }
  if (rec.media.state === "inactive") return;
  clearTimeout(rec.timer);
  rec.media.stop();
}

function resetSpeak(button, name) {
  button.setAttribute("aria-pressed", "false");
  button.textContent = "Speak";
  button.setAttribute("aria-label", `Speak your answer for ${name}`);
}

function finishRecording(rec) {
  rec.stream.getTracks().forEach((track) => track.stop());
  recorder = null;
  resetSpeak(rec.button, rec.name);
  rec.send(rec.pendingId, new Blob(rec.chunks, { type: rec.media.mimeType || "audio/webm" }));
}
