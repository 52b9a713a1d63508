// What a socket's close means. A refused WebSocket cannot carry a machine code,
// only the exact detail as its reason (docs/auth.md), so the one table below maps
// those few reasons to the codes the HTTP answers carry; everything else in the
// page switches on codes.

const REFUSAL_CODES = {
  "PIN required": "pin_required",
  "API key required": "api_key_required",
  "loopback origin required": "loopback_required",
  "loopback origin or admin API key required": "admin_required",
  "browser origin rejected": "origin_rejected",
  "Too many authentication attempts": "too_many_attempts",
  "authentication is not ready": "auth_not_ready",
  "host not allowed: VOXGATE_ALLOWED_HOSTS lists the names this server answers to": "host_rejected",
  // sent with 1013 (retryable: the page reconnects with backoff), listed so every detail has its code
  "authentication store unavailable": "auth_store_unavailable",
};

/** Codes after which signing in again can help. */
export const SIGN_IN_CODES = new Set(["pin_required", "api_key_required"]);

/** The machine code of a 1008 refusal, or "" for any other close. */
export function refusalCode(code, reason) {
  return code === 1008 ? REFUSAL_CODES[reason] || "" : "";
}

/** True when the refusal means the page must sign in again (the gate can help). */
export function needsSignIn(code, reason) {
  return SIGN_IN_CODES.has(refusalCode(code, reason));
}

/**
 * True when the socket was lost rather than ended: the network dropped (1006),
 * the server went away or restarts (1001, 1012) or is briefly over capacity (1013).
 */
export function isDrop(code) {
  return code === 1001 || code === 1006 || code === 1012 || code === 1013;
}

/** A sentence for the user, or "" for a normal end. `what` names the socket ("Dictation"). */
export function describeClose(what, code, reason) {
  const why = reason ? `: ${reason}` : "";
  switch (code) {
    case 1000:
      return "";
    case 1008:
      return `${what} was refused by the gateway${why || ": not signed in"}.`;
    case 1009:
      return `${what} stopped: a message was larger than the gateway accepts.`;
    case 1011:
      return `${what} stopped because of a server error${why}.`;
    case 1013:
      return `The gateway is busy (too many ${what.toLowerCase()} sessions right now). Try again in a moment.`;
    case 4400:
      return `${what} stopped: bad request${why}.`;
    case 4408:
      return `${what} was closed after a period without activity.`;
    case 1006:
      return `${what} lost its connection to the gateway.`;
    default:
      return `${what} ended unexpectedly (close code ${code}${reason ? ", " + reason : ""}).`;
  }
}
