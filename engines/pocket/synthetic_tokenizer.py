"""A sentencepiece tokenizer trained on a synthetic English-like corpus.

What the random test checkpoint (``engines.pocket.random_checkpoint``) ships as its
``tokenizer.model``: common English words plus pronounceable pseudo-words, with
numbers, contractions and punctuation, drawn from ``random.Random(seed)``, so a seed
gives the same model byte for byte.
"""

from __future__ import annotations

import io
import random
from collections.abc import Iterator

_COMMON_WORDS = (
    "the of and to a in is it you that he was for on are with as I his they be at one have this from "
    "or had by hot word but what some we can out other were all there when up use your how said an "
    "each she which do their time if will way about many then them write would like so these her long "
    "make thing see him two has look more day could go come did number sound no most people my over "
    "know water than call first who may down side been now find any new work part take get place made "
    "live where after back little only round man year came show every good me give our under name very "
    "through just form sentence great think say help low line differ turn cause much mean before move "
    "right boy old too same tell does set three want air well also play small end put home read hand "
    "port large spell add even land here must big high such follow act why ask men change went light "
    "kind off need house picture try us again animal point mother world near build self earth father "
    "hello speech voice model stream frame audio gateway weather today tomorrow morning thanks please"
).split()
_ONSETS = ("", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w",
           "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "sl", "st", "str", "th", "tr", "wh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ee", "oo", "ou", "y")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "ng", "nt", "st", "ck", "rd", "ll", "ss")
_PUNCT = (".", ".", ".", "?", "!", ",")


def synthetic_corpus(seed: int, n_sentences: int) -> Iterator[str]:
    """English-like sentences: common words plus pronounceable pseudo-words, Zipf-ish."""
    rng = random.Random(seed)
    pseudo = []
    for _ in range(6000):
        syllables = rng.choice((1, 1, 2, 2, 2, 3, 3, 4))
        pseudo.append("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                              for _ in range(syllables)))
    lexicon = list(_COMMON_WORDS) + pseudo
    weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(lexicon))]
    for _ in range(n_sentences):
        words = rng.choices(lexicon, weights=weights, k=rng.randint(3, 18))
        if rng.random() < 0.15:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 2099)))
        if rng.random() < 0.1:
            words.insert(rng.randrange(len(words)), rng.choice(("don't", "it's", "I'm", "we're", "can't")))
        text = " ".join(words)
        yield text[0].upper() + text[1:] + rng.choice(_PUNCT)


def train_tokenizer(vocab_size: int, seed: int) -> bytes:
    """A sentencepiece unigram model with exactly ``vocab_size`` pieces, as bytes."""
    import sentencepiece as spm

    # The trainer refuses a vocabulary larger than the corpus supports: ~2.5 MB
    # of text for 4000 pieces, proportionally less for a small vocabulary.
    n_sentences = max(2000, vocab_size * 12)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=synthetic_corpus(seed, n_sentences), model_writer=buf, vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, num_threads=1, shuffle_input_sentence=False,
        input_sentence_size=0, minloglevel=2, hard_vocab_limit=True,
    )
    return buf.getvalue()
