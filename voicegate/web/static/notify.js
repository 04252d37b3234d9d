// Notifications on this device: after pairing, where the browser can show them and the server
// sends them (GET /device/push), the page offers one toggle. Turning it on asks the browser for
// permission, subscribes with the server's VAPID key through the service worker (sw.js), and
// registers the subscription with a signed POST /device/push; turning it off takes it back.

import { $ } from "/approve/dom.js";
import { postJson, signedFetch } from "/approve/device.js";

const SW = "/approve/sw.js";
const state = { key: "", registration: null };

function supported() {
  return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
}

function status(text) {
  $("notify-status").textContent = text;
}

function showOn(on) {
  const button = $("notify-on");
  button.setAttribute("aria-pressed", String(on));
  button.textContent = on ? "Notifications on" : "Turn on notifications";
}

// Called once paired: shows the toggle where notifications can work here, else nothing.
export async function offerNotifications() {
  $("notify-box").hidden = true;
  if (!supported()) return;
  try {
    const response = await signedFetch("GET", "/device/push");
    if (!response.ok) return;
    const push = await response.json();
    if (!push.enabled) return;
    state.key = push.public_key;
    state.registration = await navigator.serviceWorker.register(SW, { type: "module" });
    const existing = await state.registration.pushManager.getSubscription();
    showOn(Boolean(existing) && push.subscribed && Notification.permission === "granted");
    $("notify-box").hidden = false;
  } catch (err) {
    // No service worker here (a private window, a policy): the page works as before.
  }
}

export function bindNotify() {
  const button = $("notify-on");
  button.setAttribute("aria-pressed", "false");
  button.addEventListener("click", () =>
    (button.getAttribute("aria-pressed") === "true" ? turnOff() : turnOn()));
}

function keyBytes(text) {
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4);
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

async function turnOn() {
  status("Turning notifications on…");
  const permission = await Notification.requestPermission();
  if (permission !== "granted") {
    status("Notifications are blocked for this page. Allow them in the browser's settings for " +
      "this site, then press “Turn on notifications” again.");
    return;
  }
  try {
    const manager = state.registration.pushManager;
    const subscription = await manager.getSubscription() ||
      await manager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(state.key) });
    const response = await postJson("/device/push", subscription.toJSON());
    const body = await response.json();
    if (!response.ok) {
      status(`Notifications are not on: ${body.next_step || "the server refused them."}`);
      return;
    }
    showOn(true);
    status("Notifications are on: this device is told when a request waits.");
  } catch (err) {
    status("This browser could not turn notifications on here (it needs its push service). " +
      "Keep this page open to see requests.");
  }
}

async function turnOff() {
  const subscription = await state.registration.pushManager.getSubscription();
  if (subscription) await subscription.unsubscribe();
  await signedFetch("DELETE", "/device/push");
  showOn(false);
  status("Notifications are off.");
}
