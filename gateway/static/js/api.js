// Small helpers for talking to the gateway that served this page (same origin,
// so the HttpOnly session or PIN cookie rides along on every request and socket).

const REQUEST_TIMEOUT_MS = 15000;
const UPLOAD_TIMEOUT_MS = 120000;  // a voice clone runs the engine's encoder

/**
 * fetch with a timeout; resolves to {status, body, retryAfterS} and never throws
 * for HTTP errors. A network failure resolves to status 0 with the error text.
 * `json` sends a JSON body, `form` a FormData (multipart) body.
 */
export async function request(method, path, {headers = {}, json, form} = {}) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), form ? UPLOAD_TIMEOUT_MS : REQUEST_TIMEOUT_MS);
  const init = {method, headers: {...headers}, credentials: "same-origin", signal: controller.signal};
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
  } else if (form !== undefined) {
    init.body = form;  // the browser writes the multipart boundary
  }
  try {
    const response = await fetch(path, init);
    let body = null;
    const text = await response.text();
    if (text) {
      try { body = JSON.parse(text); } catch { body = {detail: text}; }
    }
    const retry = Number.parseInt(response.headers.get("Retry-After") || "", 10);
    return {status: response.status, body, retryAfterS: Number.isFinite(retry) ? retry : null};
  } catch (err) {
    const why = err.name === "AbortError" ? "the gateway did not answer in time" : String(err.message || err);
    return {status: 0, body: {detail: why}, retryAfterS: null};
  } finally {
    clearTimeout(timer);
  }
}

/** The human `detail` of an error body, or "" when there is none. */
export function detailOf(result) {
  const detail = result && result.body && result.body.detail;
  return typeof detail === "string" ? detail : "";
}

/** The machine `code` of an error body (gateway/errors.py), or "" when there is none. */
export function codeOf(result) {
  const code = result && result.body && result.body.code;
  return typeof code === "string" ? code : "";
}

/** ws:// or wss:// URL of a gateway socket on this page's own origin. */
export function socketUrl(path, params) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = new URLSearchParams(params).toString();
  return `${scheme}//${location.host}${path}${query ? "?" + query : ""}`;
}
