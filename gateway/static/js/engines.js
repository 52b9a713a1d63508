// What GET /v1/engines says about each panel: whether it can be used, and a
// note that explains why not (the engine's own detail and hint) when it cannot.

/** A note element: text, then the hint as code when there is one. */
function note(text, hint) {
  const span = document.createElement("span");
  span.append(text);
  if (hint) {
    span.append(" ");
    const code = document.createElement("code");
    code.textContent = hint;
    span.append(code);
  }
  return span;
}

function stateNote(label, engine) {
  if (engine.state === "loading") return note(`${label} is still loading…`);
  const detail = engine.detail ? `: ${engine.detail}` : ` (${engine.state})`;
  return note(`${label} is unavailable${detail}.`, engine.hint);
}

/**
 * {asr: {available, note, languages}, tts: {available, note, defaultEngine, engines}, loading}
 * from the `engines` list of GET /v1/engines. `asr.languages` lists what the
 * recognizer can be told to expect, empty unless the model is multilingual;
 * `tts.engines` is every TTS engine, ready or not, for the engine picker.
 */
export function panelStates(engines) {
  const asr = engines.find((e) => e.kind === "asr");
  const tts = engines.filter((e) => e.kind === "tts");
  const loading = engines.some((e) => e.state === "loading");
  const out = {loading};
  const languages = asr && asr.multilingual === true && Array.isArray(asr.languages) ? asr.languages : [];

  if (!asr) {
    out.asr = {available: false, languages, note: note("Dictation is off: this gateway runs without speech recognition (start it with --engines asr).")};
  } else if (asr.state === "ready") {
    out.asr = {available: true, languages, note: note(`Recognizer: ${asr.model || "ready"}.`)};
  } else {
    out.asr = {available: false, languages, note: stateNote("Speech recognition", asr)};
  }

  const ready = tts.filter((e) => e.state === "ready");
  const preferred = ready.find((e) => e.default) || ready[0];
  if (tts.length === 0) {
    out.tts = {available: false, note: note("Speech is off: this gateway runs without a TTS engine (start it with --engines pocket)."), defaultEngine: null, engines: tts};
  } else if (!preferred) {
    const wrap = document.createElement("span");
    tts.forEach((e, i) => {
      if (i) wrap.append(" ");
      wrap.append(stateNote(`The ${e.id} engine`, e));
    });
    out.tts = {available: false, note: wrap, defaultEngine: null, engines: tts};
  } else {
    const others = tts.filter((e) => e.state !== "ready");
    const wrap = note(`Engine: ${preferred.id}.`);
    for (const e of others) {
      wrap.append(" ");
      wrap.append(stateNote(`The ${e.id} engine`, e));
    }
    out.tts = {available: true, note: wrap, defaultEngine: preferred.id, engines: tts};
  }
  return out;
}
