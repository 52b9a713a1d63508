// Small helpers for talking to the gateway that served this page (same origin,
// so the HttpOnly session or PIN cookie rides along on every request and socket).

const REQUEST_TIMEOUT_MS = 15000;

/**
 * fetch with a timeout; resolves to {status, body, retryAfterS} and never throws
 * for HTTP errors. A network failure resolves to status 0 with the error text.
 */
export async function request(method, path, {headers = {}, json} = {}) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
  const init = {method, headers: {...headers}, credentials: "same-origin", signal: controller.signal};
  if (json !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(json);
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

/** The `detail` of an error body, or "" when there is none. */
export function detailOf(result) {
  const detail = result && result.body && result.body.detail;
  return typeof detail === "string" ? detail : "";
}

/** ws:// or wss:// URL of a gateway socket on this page's own origin. */
export function socketUrl(path, params) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = new URLSearchParams(params).toString();
  return `${scheme}//${location.host}${path}${query ? "?" + query : ""}`;
}
