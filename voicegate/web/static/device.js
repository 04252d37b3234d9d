// This device's key and signed requests. The ECDSA P-256 private key is made here as
// non-extractable and kept in IndexedDB; the server only ever sees the public key.

const SCHEME = "voicegate-device-v2";
// The request headers the signature covers, in order: they pick the set and the audio decoder.
const COVERED = ["Content-Type", "X-Voicegate-Pending", "X-Voicegate-Nonce"];
const enc = new TextEncoder();

export const session = {
  device: null, // {id, user, kind, keys: CryptoKeyPair}
  offset: 0, // server clock minus this device's clock, in seconds
};

export function now() {
  return Date.now() / 1000 + session.offset;
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

export const loadDevice = () => dbDo("readonly", (s) => s.get("current"));
export const saveDevice = (device) => dbDo("readwrite", (s) => s.put(device, "current"));
export const forgetDevice = () => dbDo("readwrite", (s) => s.delete("current"));

// ---- signing ------------------------------------------------------------------------------

function b64url(bytes) {
  let text = "";
  for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function hex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

// The header holds whole seconds: a finer offset (``syncTo``) that agrees with it is kept.
export function syncClock(response) {
  const server = Number(response.headers.get("X-Voicegate-Time"));
  if (!Number.isFinite(server) || server <= 0) return;
  const offset = server - Date.now() / 1000;
  if (session.offset < offset || session.offset >= offset + 1) session.offset = offset;
}

// The server's clock to the fraction of a second (``server_time`` of /device/pending), so a
// countdown here ends when the server's deadline does.
export function syncTo(serverTime) {
  const server = Number(serverTime);
  if (Number.isFinite(server) && server > 0) session.offset = server - Date.now() / 1000;
}

function coveredValue(headers, name) {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name.toLowerCase());
  return key === undefined ? "" : String(headers[key]);
}

export async function signedFetch(method, path, body = null, headers = {}) {
  const bytes = body ?? new Uint8Array();
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const stamp = String(Math.floor(Date.now() / 1000 + session.offset));
    const digest = hex(await crypto.subtle.digest("SHA-256", bytes));
    const covered = COVERED.map((name) => coveredValue(headers, name));
    const message = [SCHEME, session.device.id, method, path, stamp, digest, ...covered]
      .join("\n");
    const signature = await crypto.subtle.sign(
      { name: "ECDSA", hash: "SHA-256" }, session.device.keys.privateKey, enc.encode(message));
    const response = await fetch(path, {
      method,
      headers: {
        ...headers,
        "X-Voicegate-Device": session.device.id,
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

export async function postJson(path, value) {
  return signedFetch("POST", path, enc.encode(JSON.stringify(value)),
    { "Content-Type": "application/json" });
}

export async function makeKeys() {
  const keys = await crypto.subtle.generateKey(
    { name: "ECDSA", namedCurve: "P-256" }, false, ["sign", "verify"]);
  const jwk = await crypto.subtle.exportKey("jwk", keys.publicKey);
  return { keys, publicKey: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y } };
}
