// The service worker behind notifications. A push (encrypted to this browser, RFC 8291) holds
// a set's plain summary and id, never its nonce. It shows a notification; for a card a tap may
// answer (one card, not high risk, shown whole: the notice's ``tap``) it offers Approve and
// Cancel, else "Answer by voice" and a tap that opens the page on that card.
//
// Approve and Cancel are answered here, signed with this device's own key (the same
// non-extractable key the page made, read from IndexedDB): a signed GET /device/pending gives
// the set and its nonce, and only if it is still the card the notification showed (same id,
// same summary, still one tappable card) is a signed POST /device/tap sent, which the server
// checks as any tap. Anything else opens the page instead.

import { loadDevice, postJson, session, signedFetch } from "/approve/device.js";

const PAGE = "/approve";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let notice = null;
  try {
    notice = event.data ? event.data.json() : null;
  } catch (err) {
    notice = null; // not ours, or damaged: shown as a plain nudge below
  }
  event.waitUntil(show(notice));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const work = clicked(event.notification.data || {}, event.action);
  event.waitUntil(work);
});

function show(notice) {
  if (!notice || typeof notice.pending_id !== "string") {
    return self.registration.showNotification("voicegate", {
      body: "Open the approve page to see what is waiting.", data: {},
    });
  }
  const actions = [];
  if (notice.event !== "done") {
    if (notice.tap) {
      actions.push({ action: "approve", title: "Approve" }, { action: "cancel", title: "Cancel" });
    }
    actions.push({ action: "voice", title: "Answer by voice" });
  }
  return self.registration.showNotification(notice.title || "voicegate", {
    body: notice.summary || "",
    tag: notice.pending_id,
    renotify: true,
    requireInteraction: notice.event !== "done",
    data: notice,
    actions: actions.slice(0, Notification.maxActions || 2),
  });
}

async function clicked(notice, action) {
  if ((action === "approve" || action === "cancel") && notice.tap) {
    return answer(notice, action);
  }
  return openPage(notice, action === "voice");
}

// A one-card set still as the notification showed it.
function same(set, notice) {
  return set && set.id === notice.pending_id && set.summary === notice.summary &&
    set.stage === "choose" && set.cards.length === 1 && set.risk !== "high" &&
    !set.cards[0].shortened;
}

async function answer(notice, action) {
  session.device = await loadDevice().catch(() => null);
  if (!session.device || !session.device.keys) return openPage(notice, false);
  let body;
  try {
    const response = await signedFetch("GET", "/device/pending");
    if (!response.ok) return report(notice, "Nothing ran", "voicegate refused this device.");
    body = await response.json();
  } catch (err) {
    return report(notice, "Nothing ran", "voicegate could not be reached.");
  }
  const set = (body.sets || []).find((s) => s.id === notice.pending_id);
  if (!set) return report(notice, "Nothing ran", "This request is no longer waiting.");
  if (!same(set, notice)) {
    // Not the card the notification showed (changed, or altered): the page shows all of it.
    await report(notice, "Nothing ran", "This request is not as the notification showed it; " +
      "open the approve page to see it.");
    return openPage(notice, false);
  }
  const tap = await postJson("/device/tap", {
    pending_id: set.id, nonce: set.nonce, decision: action === "approve" ? "choose" : "cancel",
    card: action === "approve" ? 1 : null, input: "notification",
  });
  const result = await tap.json().catch(() => ({}));
  if (result.released && !result.reason) {
    return report(notice, "Done", notice.summary, result.receipt_id);
  }
  if (result.decision === "cancel" && !result.reason) {
    return report(notice, "Cancelled", `${notice.summary} Nothing ran.`);
  }
  return report(notice, "Nothing ran", result.next_step || "Open the approve page.");
}

function report(notice, title, text, receipt) {
  return self.registration.showNotification(title, {
    body: receipt ? `${text} Receipt ${receipt}` : text,
    tag: notice.pending_id,
    data: { ...notice, event: "done", tap: false, answered: title },
  });
}

async function openPage(notice, voice) {
  const query = notice.pending_id
    ? `?set=${encodeURIComponent(notice.pending_id)}${voice ? "&voice=1" : ""}` : "";
  const url = new URL(PAGE + query, self.location.origin).href;
  const open = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const page = open.find((c) => new URL(c.url).pathname === PAGE);
  try {
    if (page) {
      const moved = await page.navigate(url).catch(() => null);
      return await (moved || page).focus();
    }
    return await self.clients.openWindow(url);
  } catch (err) {
    return null; // not allowed to open a window now: the notification stays the way in
  }
}
