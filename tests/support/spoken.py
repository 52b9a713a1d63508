"""Numbers and contractions as they are spoken, so a word error rate does not
count "15%" against "fifteen percent", nor "here's" against "here is".

Whisper writes many spoken numbers as digits ("9:30", "$40", "1950", "5th").
``spell_numbers`` turns such tokens back into words the way an American
speaker reads them; a reference written in words then matches either form.
Covers what the benchmark's sentences hold: whole numbers below a million,
clock times, money in dollars, percentages, ordinals and years 1100-1999,
and the titles in ``SPOKEN_ABBREVIATIONS``.
"""

from __future__ import annotations

import re

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
ORDINAL = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
           "nine": "ninth", "twelve": "twelfth"}

# titles a recognizer may abbreviate, as they are spoken
SPOKEN_ABBREVIATIONS = {"dr": "doctor", "mr": "mister", "mrs": "missus", "ok": "okay"}

_TOKEN = re.compile(r"(\$?)(\d[\d,]*)(?:([:.])(\d\d))?(st|nd|rd|th|%)?$")


def cardinal(n: int) -> str:
    """``n`` (0 <= n < 1,000,000) in words, without "and": 365 -> three hundred sixty five."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else " " + ONES[n % 10])
    if n < 1000:
        return ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + cardinal(n % 100))
    return cardinal(n // 1000) + " thousand" + ("" if n % 1000 == 0 else " " + cardinal(n % 1000))


def ordinal(n: int) -> str:
    words = cardinal(n).split()
    last = words[-1]
    if last in ORDINAL:
        words[-1] = ORDINAL[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def _year(n: int) -> str:
    high, low = divmod(n, 100)
    if low == 0:
        return cardinal(high) + " hundred"
    return cardinal(high) + " " + ("oh " + ONES[low] if low < 10 else cardinal(low))


def spell_token(token: str) -> str:
    """One whitespace-free token with digits, spelled out; anything else unchanged."""
    match = _TOKEN.match(token)
    if not match:
        return token
    dollar, digits, sep, minutes, suffix = match.groups()
    n = int(digits.replace(",", ""))
    if n >= 1_000_000:
        return token
    if sep is not None:  # 9:30 / 9.30: a clock time
        rest = "" if minutes == "00" else " " + (("oh " + ONES[int(minutes)]) if minutes[0] == "0"
                                                  else cardinal(int(minutes)))
        return cardinal(n) + rest
    if suffix in ("st", "nd", "rd", "th"):
        return ordinal(n)
    year = 1100 <= n <= 1999 and "," not in digits and not dollar and suffix is None
    spoken = _year(n) if year else cardinal(n)
    if dollar:
        spoken += " dollar" if n == 1 else " dollars"
    if suffix == "%":
        spoken += " percent"
    return spoken


def spell_numbers(text: str) -> str:
    """``text`` with every number token and title abbreviation spelled out."""
    out = []
    for raw in text.split():
        core = raw.strip(".,;:!?\"()")
        if any(c.isdigit() for c in core):
            out.append(spell_token(core))
        else:
            out.append(SPOKEN_ABBREVIATIONS.get(core.lower(), raw))
    return " ".join(out)


# "'s" is "is" only after these; after a noun it is a possessive and stays
_IS_AFTER = ("it", "that", "what", "here", "there", "he", "she", "who", "where", "how")
_CONTRACTIONS = {"won't": "will not", "can't": "can not", "let's": "let us",
                 **{f"{w}'s": f"{w} is" for w in _IS_AFTER}}
_SUFFIXES = (("n't", " not"), ("'re", " are"), ("'ll", " will"), ("'ve", " have"), ("'m", " am"), ("'d", " would"))


def expand_contractions(text: str) -> str:
    """Lower-case ``text`` with its contractions written out: "Here's what we'll do" -> "here is what we will do"."""
    out = []
    for token in text.lower().replace("\u2019", "'").split():
        core = token.strip(".,!?;:\"")
        full = _CONTRACTIONS.get(core)
        if full is None:
            full = next((core[:-len(s)] + w for s, w in _SUFFIXES if core.endswith(s) and len(core) > len(s)), core)
        out.append(token.replace(core, full) if core else token)
    return " ".join(out)
