// The transcript kept in local storage, so a reload does not lose it: a list of
// lines {text, start, end} (seconds in the dictated audio). Bounded: past
// MAX_LINES the oldest lines go.

const STORAGE_KEY = "voxgate.transcript";
export const MAX_LINES = 5000;

function isLine(line) {
  return line && typeof line.text === "string" && Number.isFinite(line.start) && Number.isFinite(line.end);
}

export function loadLines() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORAGE_KEY) || "[]");
    return Array.isArray(saved) ? saved.filter(isLine).slice(-MAX_LINES) : [];
  } catch {
    return [];  // unreadable or no storage: start empty
  }
}

/** Save the lines; false when the browser refused (storage full or off). */
export function saveLines(lines) {
  try {
    if (lines.length) localStorage.setItem(STORAGE_KEY, JSON.stringify(lines.slice(-MAX_LINES)));
    else localStorage.removeItem(STORAGE_KEY);
    return true;
  } catch {
    return false;
  }
}
