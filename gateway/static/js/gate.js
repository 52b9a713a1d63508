// The login gate: what the gateway's answer to GET /v1/engines means for this
// page, and the PIN / API-key forms that exchange a credential for a cookie.
// The exact details are a contract (docs/auth.md): `loopback origin required`
// means no credential can help, so no form is offered for it.

import {detailOf, request} from "./api.js";

export const PIN_REQUIRED = "PIN required";
export const KEY_REQUIRED = "API key required";
export const LOOPBACK_REQUIRED = "loopback origin required";
export const ORIGIN_REJECTED = "browser origin rejected";

/**
 * What to show for a GET /v1/engines result: {view, message, retryAfterS?}.
 * view is one of "open", "pin", "key", "closed" (no login can help), "wait"
 * (locked out), "unreachable".
 */
export function decide(result) {
  const detail = detailOf(result);
  if (result.status === 200) return {view: "open", message: ""};
  if (result.status === 401 && detail === PIN_REQUIRED) {
    return {view: "pin", message: "This gateway is shared with a PIN. Enter the 6-digit PIN to continue."};
  }
  if (result.status === 401) {
    return {view: "key", message: "This gateway needs an API key. It is exchanged once for a session cookie; the page does not keep it."};
  }
  if (result.status === 403 && detail.includes("admin API key")) {
    return {view: "key", message: "This needs the gateway's admin API key."};
  }
  if (result.status === 403 && detail === ORIGIN_REJECTED) {
    return {view: "closed", message: "The gateway does not accept requests from this page's address (browser origin rejected). Open the page from the gateway itself, or ask its owner to list this origin in VOXGATE_ALLOWED_ORIGINS."};
  }
  if (result.status === 403) {
    return {view: "closed", message: "This gateway only serves its own machine (loopback origin required). No password can change that: open the page on the gateway's computer, or ask its owner to enable LAN sharing or an API key."};
  }
  if (result.status === 429) {
    const wait = result.retryAfterS ?? 60;
    return {view: "wait", retryAfterS: wait, message: `Too many sign-in attempts. Try again in ${wait} s.`};
  }
  if (result.status === 0) {
    return {view: "unreachable", message: `The gateway cannot be reached: ${detail}.`};
  }
  return {view: "unreachable", message: `The gateway answered ${result.status}${detail ? ": " + detail : ""}.`};
}

/** Read ?pin= from the address and remove it at once, so it stays out of history and screenshots. */
export function takePinFromAddress() {
  const url = new URL(location.href);
  const pin = url.searchParams.get("pin");
  if (pin === null) return "";
  url.searchParams.delete("pin");
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  return pin.trim();
}

/** POST /v1/auth/session with a PIN; the answer sets the vg_pin cookie. */
export function signInWithPin(pin) {
  return request("POST", "/v1/auth/session", {json: {pin, transport: "cookie"}});
}

/** POST /v1/auth/session with the key as a bearer; the answer sets the vg_session cookie. */
export function signInWithKey(key) {
  return request("POST", "/v1/auth/session", {headers: {Authorization: `Bearer ${key}`}, json: {transport: "cookie"}});
}

/** DELETE /v1/auth/session: revoke the session and clear both cookies. */
export function signOut() {
  return request("DELETE", "/v1/auth/session");
}

/** Why a sign-in attempt failed, in words for the form. */
export function signInError(result, what) {
  if (result.status === 429) return `Too many attempts. Try again in ${result.retryAfterS ?? 60} s.`;
  if (result.status === 401) return `That ${what} was not accepted.`;
  const detail = detailOf(result);
  return `Sign-in failed (${result.status || "no answer"})${detail ? ": " + detail : ""}.`;
}
