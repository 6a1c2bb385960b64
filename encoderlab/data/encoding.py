"""Text that is not UTF-8: which encoding it probably is, and the command that converts it.

A corpus file is refused when more than ``max_invalid_share`` (1%) of its characters were bytes that
are not valid UTF-8, and at least MIN_INVALID of them: then it is not UTF-8 text with a few stray
bytes (those are replaced by U+FFFD and counted) but text in another encoding, whose words would
train a vocabulary of replacement characters (issue 34: a GBK copy of 174,927 characters had 78% of
them replaced and kept 155 Chinese tokens in a 2,000-token vocabulary). The message names the
likely encoding where the detector (charset-normalizer) says so, the ``iconv`` command that
converts the file, and the setting for a user who knows the encoding (``encoding:``).

Single-byte Western code pages (Latin-1, CP1252, CP1257, ...) decode any bytes, and the detector
cannot tell them apart on a short sample; they are reported as one family, CP1252 suggested.
"""

from __future__ import annotations

import codecs
from pathlib import Path

MIN_INVALID = 16  # fewer invalid bytes than this in a file are stray bytes, whatever their share
SAMPLE_BYTES = 64 << 10  # what the detector reads

# Detector names -> (what a person calls it, iconv's name).
_NAMES = {"gb18030": ("GB18030 (GBK, GB2312)", "GB18030"), "gbk": ("GBK", "GBK"), "gb2312": ("GB2312", "GB2312"),
          "big5": ("Big5", "BIG5"), "big5hkscs": ("Big5-HKSCS", "BIG5-HKSCS"), "cp932": ("Shift-JIS (CP932)", "CP932"),
          "shift_jis": ("Shift-JIS", "SHIFT_JIS"), "euc_jp": ("EUC-JP", "EUC-JP"), "euc_kr": ("EUC-KR", "EUC-KR"),
          "cp949": ("EUC-KR (CP949)", "CP949"), "utf_16": ("UTF-16", "UTF-16"), "utf_16_le": ("UTF-16LE", "UTF-16LE"),
          "utf_16_be": ("UTF-16BE", "UTF-16BE"), "utf_32": ("UTF-32", "UTF-32"), "koi8_r": ("KOI8-R", "KOI8-R"),
          "cp1251": ("Windows-1251 (Cyrillic)", "CP1251")}
_WESTERN = ("cp125", "iso8859", "latin", "mac_", "cp850", "cp437")


def check_encoding(name: str) -> str | None:
    """Why ``name`` is not an encoding Python can decode, or None when it is."""
    try:
        codecs.lookup(name)
    except LookupError:
        return f"encoding {name!r} is not one Python knows (e.g. utf-8, gb18030, big5, shift_jis, cp1252)"
    return None


def guess_encoding(sample: bytes) -> str | None:
    """The detector's encoding of ``sample`` as a Python codec name, or None (no detector installed,
    no guess, or UTF-8/ASCII)."""
    if sample[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf_16"
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        return None
    best = from_bytes(sample[:SAMPLE_BYTES]).best()
    if best is None or best.encoding in ("utf_8", "ascii"):
        return None
    return best.encoding


def describe(encoding: str) -> tuple[str, str, str]:
    """(a person's name for it, iconv's name, the Python codec to set) for a detector's guess."""
    if encoding in _NAMES:
        label, iconv = _NAMES[encoding]
        return label, iconv, encoding
    if encoding.startswith(_WESTERN):
        return f"a single-byte Western code page (most often CP1252 or Latin-1; the detector's guess: {encoding})", \
            "CP1252", "cp1252"
    return encoding, encoding.upper().replace("_", "-"), encoding


def conversion_hint(path: Path, sample: bytes, setting: str) -> str:
    """What to do about a file that is not UTF-8: its likely encoding, the iconv command, and the
    ``setting`` (e.g. "--encoding NAME (corpus encoding: NAME)") for a user who knows theirs."""
    guess = guess_encoding(sample)
    p = Path(path)
    out = p.with_name(f"{p.stem}.utf8{p.suffix}")
    if guess is None:
        return (f"convert it to UTF-8 (iconv -f ITS_ENCODING -t UTF-8 {p} > {out}), or, if you know its encoding, "
                f"give {setting.replace('NAME', 'ITS_ENCODING')}")
    label, iconv, codec = describe(guess)
    source = "its byte-order mark" if sample[:2] in (b"\xff\xfe", b"\xfe\xff") else "charset-normalizer's guess"
    return (f"it looks like {label} text ({source}); convert it with "
            f"`iconv -f {iconv} -t UTF-8 {p} > {out}`, or read it as it is with {setting.replace('NAME', codec)}")


def read_sample(path: Path, size: int = SAMPLE_BYTES) -> bytes:
    """The first ``size`` bytes of a file (decompressed for .gz), for the detector."""
    import gzip

    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
            return f.read(size)
    except (OSError, EOFError):
        return b""
