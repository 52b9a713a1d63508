// The transcript as a file: plain text (one line per final) or subtitles
// (.srt, .vtt) with each final's start and end in the dictated audio.

export const FORMATS = {
  txt: {type: "text/plain", render: toText},
  srt: {type: "application/x-subrip", render: toSrt},
  vtt: {type: "text/vtt", render: toVtt},
};

function spoken(lines) {
  return lines.filter((line) => line.text.trim());
}

/** "00:01:02,345" (srt, `comma`) or "00:01:02.345" (vtt). */
export function timestamp(seconds, separator) {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const pad = (n, width = 2) => String(n).padStart(width, "0");
  const h = Math.floor(ms / 3600000);
  const m = Math.floor((ms % 3600000) / 60000);
  const s = Math.floor((ms % 60000) / 1000);
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`;
}

export function toText(lines) {
  return spoken(lines).map((line) => line.text.trim()).join("\n");
}

export function toSrt(lines) {
  return spoken(lines).map((line, i) =>
    `${i + 1}\n${timestamp(line.start, ",")} --> ${timestamp(line.end, ",")}\n${line.text.trim()}\n`).join("\n");
}

export function toVtt(lines) {
  const cues = spoken(lines).map((line) =>
    `${timestamp(line.start, ".")} --> ${timestamp(line.end, ".")}\n${line.text.trim()}\n`);
  return ["WEBVTT\n", ...cues].join("\n");
}

/** Hand `blob` to the browser as a download named `name`. */
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);  // the download has started by then
}

/** "transcript-2026-12-06-0712" */
export function fileStem(prefix, date = new Date()) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${prefix}-${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}-${pad(date.getHours())}${pad(date.getMinutes())}`;
}
