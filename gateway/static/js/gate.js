// The login gate: what the gateway's answer to GET /v1/engines means for this
// page, and the PIN / API-key forms that exchange a credential for a cookie.
// Decisions switch on the machine `code` of the answer (docs/auth.md), never on
// its English detail: `loopback_required` means no credential can help, so no
// form is offered for it.

import {codeOf, detailOf, request} from "./api.js";

const NOBODY = {principal: null, admin: false, session: false};

/**
 * What to show for a GET /v1/engines result: {view, message, retryAfterS?}.
 * view is one of "open", "pin", "key", "closed" (no login can help), "wait"
 * (locked out), "unreachable" (asked again later).
 */
export function decide(result) {
  if (result.status === 200) return {view: "open", message: ""};
  switch (codeOf(result)) {
    case "pin_required":
      return {view: "pin", message: "This gateway is shared with a PIN. Enter the 6-digit PIN to continue."};
    case "api_key_required":
      return {view: "key", message: "This gateway needs an API key. It is exchanged once for a session cookie; the page does not keep it."};
    case "admin_required":
      return {view: "key", message: "This needs the gateway's admin API key."};
    case "origin_rejected":
      return {view: "closed", message: "The gateway does not accept requests from this page's address (browser origin rejected). Open the page from the gateway itself, or ask its owner to list this origin in VOXGATE_ALLOWED_ORIGINS."};
    case "loopback_required":
      return {view: "closed", message: "This gateway only serves its own machine (loopback origin required). No password can change that: open the page on the gateway's computer, or ask its owner to enable LAN sharing or an API key."};
    case "too_many_attempts": {
      const wait = result.retryAfterS ?? 60;
      return {view: "wait", retryAfterS: wait, message: `Too many sign-in attempts. Try again in ${wait} s.`};
    }
    case "auth_not_ready":
      return {view: "unreachable", message: "The gateway is starting or stopping. Trying again…"};
    default:
      break;
  }
  const detail = detailOf(result);
  if (result.status === 0) return {view: "unreachable", message: `The gateway cannot be reached: ${detail}.`};
  return {view: "unreachable", message: `The gateway answered ${result.status}${detail ? ": " + detail : ""}.`};
}

/** Who this page is to the gateway: {principal, admin, session} from GET /v1/auth/me. */
export async function whoAmI() {
  const result = await request("GET", "/v1/auth/me");
  if (result.status !== 200 || !result.body) return NOBODY;
  return {principal: result.body.principal ?? null, admin: result.body.admin === true,
          session: result.body.session === true};
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
  switch (codeOf(result)) {
    case "too_many_attempts":
      return `Too many attempts. Try again in ${result.retryAfterS ?? 60} s.`;
    case "pin_required":
    case "api_key_required":
      return `That ${what} was not accepted.`;
    case "loopback_required":
      return `This gateway no longer accepts a ${what} from here (LAN sharing may have been turned off).`;
    case "origin_rejected":
      return "The gateway does not accept sign-ins from this page's address.";
    default:
      break;
  }
  const detail = detailOf(result);
  return `Sign-in failed (${result.status || "no answer"})${detail ? ": " + detail : ""}.`;
}
