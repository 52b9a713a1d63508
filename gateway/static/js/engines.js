// What GET /v1/engines says about each panel: whether it can be used, and a
// short note. Only an admin reads why an engine is unavailable and how to fix
// it (the gateway sends the detail and hint, server paths and commands, to
// admins only); everyone else reads which engine works, or that the feature is
// unavailable.

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

/** One line for an admin, the engine's detail and hint folded under it (they can be long). */
function stateNote(label, engine) {
  if (engine.state === "loading") return note(`${label} is still loading…`);
  const span = note(`${label} is unavailable (${engine.state}).`);
  if (engine.detail || engine.hint) {
    const why = document.createElement("details");
    why.className = "engine-why";
    const summary = document.createElement("summary");
    summary.textContent = "Why, and how to fix it";
    why.append(summary, note(engine.detail ? `${engine.detail}.` : "", engine.hint));
    span.append(" ", why);
  }
  return span;
}

/** Every engine's note for an admin; for anyone else `plain`, or nothing. */
function unavailable(engines, label, plain, admin) {
  if (!admin) return engines.some((e) => e.state === "loading") ? note(`${plain} is still loading…`) : note(`${plain} is unavailable on this gateway.`);
  const wrap = document.createElement("span");
  engines.forEach((e, i) => {
    if (i) wrap.append(" ");
    wrap.append(stateNote(label(e), e));
  });
  return wrap;
}

/**
 * {asr: {available, note, languages}, tts: {available, note, defaultEngine, engines}, loading}
 * from the `engines` list of GET /v1/engines; `admin`: whether the page's user may
 * administer the gateway (GET /v1/auth/me). `asr.languages` lists what the
 * recognizer can be told to expect, empty unless the model is multilingual;
 * `tts.engines` is every TTS engine, ready or not, for the engine picker.
 */
export function panelStates(engines, admin = false) {
  const asr = engines.find((e) => e.kind === "asr");
  const tts = engines.filter((e) => e.kind === "tts");
  const loading = engines.some((e) => e.state === "loading");
  const out = {loading};
  const languages = asr && asr.multilingual === true && Array.isArray(asr.languages) ? asr.languages : [];

  if (!asr) {
    out.asr = {available: false, languages, note: admin
      ? note("Dictation is off: this gateway runs without speech recognition (start it with --engines asr).")
      : note("Dictation is not offered by this gateway.")};
  } else if (asr.state === "ready") {
    out.asr = {available: true, languages, note: note(`Recognizer: ${asr.model || "ready"}.`)};
  } else {
    out.asr = {available: false, languages, note: unavailable([asr], () => "Speech recognition", "Dictation", admin)};
  }

  const ready = tts.filter((e) => e.state === "ready");
  const preferred = ready.find((e) => e.default) || ready[0];
  if (tts.length === 0) {
    out.tts = {available: false, defaultEngine: null, engines: tts, note: admin
      ? note("Speech is off: this gateway runs without a TTS engine (start it with --engines pocket).")
      : note("Speech is not offered by this gateway.")};
  } else if (!preferred) {
    out.tts = {available: false, defaultEngine: null, engines: tts,
               note: unavailable(tts, (e) => `The ${e.id} engine`, "Speech", admin)};
  } else {
    const others = tts.filter((e) => e.state !== "ready");
    const wrap = note(`Engine: ${preferred.id}.`);
    if (admin && others.length) wrap.append(" ", unavailable(others, (e) => `The ${e.id} engine`, "", true));
    out.tts = {available: true, note: wrap, defaultEngine: preferred.id, engines: tts};
  }
  return out;
}
