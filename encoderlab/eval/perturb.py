"""Text perturbations with a known effect on the label: synonym substitution and negation insertion.

English only; each function returns None when the text offers nothing it may change, so that
callers count the perturbable examples instead of comparing unchanged ones.

**Synonym substitution** (label kept). A word is eligible when it is all lowercase letters, at
least 3 long, not a function word (STOPWORDS), a WordNet lemma under exactly one part of speech,
and not possibly an inflection of another lemma (``films``, ``charming`` of *charm*, ``found`` of
*find*). The part of speech is decided without a tagger by that rule: a word WordNet knows only as
a noun is a noun wherever it appears (closed-class words, which WordNet lacks, are in STOPWORDS).
Its replacement is another single lowercase word of the word's *most frequent* synset (WordNet
orders senses by corpus frequency) whose own most frequent sense is that synset too, and that is
not an inflected form: a base form is replaced by a base form of the same part of speech, and both
words are read in the same sense ("embark" is not replaced by "ship", whose first sense is "send by
ship"). After "a" or "an", the replacement starts with a vowel letter exactly when the word did.
Capitalised words (names, a sentence's first word) are left alone. Of the n eligible words of a
text, ``max(1, round(rate * n))`` (at most ``max_substitutions``) are replaced, chosen by a
generator seeded with (seed, text): the same text and seed always give the same copy, whatever the
order of the data set.

**Negation, label flipped** (``negate_predicate``): insert "not" after the one copula (is, are,
was, were; "'s" and "'re" after a pronoun) of a single-clause text with no negation already and no
quantified subject. Single clause: no conjunction, subordinator or relative pronoun (JOINERS) and
no comma, semicolon, colon or bracket, so "not" negates the whole proposition.
- ``sentiment``: the copula must be followed by an optional degree adverb, then an adjective
  (WordNet has it as an adjective and not as a verb, and it is not an inflected form), then only
  final punctuation, and the subject holds no adjective: the sentence says one evaluative thing of
  its subject, and "X is not ADJ" reverses its polarity. Label: the other of the two classes.
- ``entailment`` (hypothesis of an entailed pair only): P entails H, so P contradicts not-H; the
  label becomes the task's not-entailed class (``not_entailment`` or ``contradiction``).

**Negation, label kept** (``append_tautology``): append "and false is not true" before the final
punctuation (the negation stress test of Naik et al. 2018, "Stress Test Evaluation for Natural
Language Inference"). The clause is a tautology: it adds no sentiment to a review and no
information to a hypothesis, so every label stays. Applies to every text.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from encoderlab.eval.wordnet import WordNet

STOPWORDS = frozenset("""
a about above across after again against all almost alone along already also although always am among an and
another any anybody anyone anything anyway anywhere are around as at away back be became because become becomes
been before behind being below beside besides between beyond both but by can cannot could did do does doing done
down during each either else enough even ever every everybody everyone everything everywhere except far few for
from further get gets getting go goes going got had has have having he her here hers herself him himself his how
however i if in indeed inside instead into is it its itself just least less let like made make makes many may me
might mine more most much must my myself near neither never next no nobody none nor not nothing now nowhere of off
often on once one only onto or other others otherwise our ours ourselves out outside over own per perhaps quite
rather really same shall she should since so some somebody someone something sometimes somewhat somewhere still
such than that the their theirs them themselves then there therefore these they this those though through
throughout thus to together too toward towards under unless until up upon us very via was we well were what
whatever when whenever where whereas wherever whether which while who whoever whole whom whose why will with
within without would yet you your yours yourself yourselves
""".split())
NEGATIONS = frozenset("not n't no never nothing nobody none neither nor nowhere hardly barely scarcely cannot "
                      "without".split())
JOINERS = frozenset("and or but although though yet however while whereas despite unless if except because that "
                    "which who whom whose when whenever where since so than as before after until".split())
QUANTIFIERS = frozenset("all some many most few several every each both any no none half".split())
DEGREE = frozenset("very so too really quite pretty extremely truly rather fairly incredibly remarkably genuinely "
                   "utterly simply just also downright absolutely totally completely mostly surprisingly "
                   "thoroughly undeniably".split())
COPULAS = frozenset(["is", "are", "was", "were"])
SUBJECT_PRONOUNS = {"'s": frozenset("it that this he she there here what".split()),
                    "'re": frozenset("you we they".split())}
CLAUSE_BREAKS = frozenset(",;:()[]{}") | {"--"}
FINAL = frozenset(".!?") | {"..."}
TAUTOLOGY = "and false is not true"

# A word: letters only, not joined to an apostrophe or hyphen ("n't", "'s", "ex-wife" are skipped).
WORD = re.compile(r"(?<![\w'’-])[A-Za-z]+(?![\w'’-])")
ARTICLE = re.compile(r"(?:^|\W)an?\s+$", re.IGNORECASE)  # searched in the text before a word
# Tokens for the clause rules: clitics ("'s" of "it's" or SST-2's "it 's"), words (with inner hyphens
# and dots), "..." and "--", any other symbol. A contracted negation is found in the raw text.
TOKEN = re.compile(r"'[A-Za-z]+|[A-Za-z0-9]+(?:[-.][A-Za-z0-9]+)*|\.\.\.|--|\S")
NOT_CONTRACTED = re.compile(r"n['’]t\b", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class Substitution:
    start: int  # character offset in the original text
    word: str
    replacement: str
    pos: str  # WordNet letter: n, v, a, r


@dataclass(frozen=True, kw_only=True)
class Substituted:
    text: str
    substitutions: tuple[Substitution, ...]


# ---- synonym substitution ----------------------------------------------------------------------
def candidates(word: str, wordnet: WordNet) -> tuple[str, tuple[str, ...]] | None:
    """(POS, replacements) for an eligible word (module doc), None for any other."""
    if len(word) < 3 or not word.isalpha() or not word.islower() or word in STOPWORDS or word in NEGATIONS:
        return None
    pos = wordnet.pos_of(word)
    if len(pos) != 1 or wordnet.may_be_inflected(word):
        return None
    (p,) = pos
    sense = wordnet.first_synset(word, p)
    subs = tuple(s for s in wordnet.synonyms(word, p)
                 if s.isalpha() and s.islower() and s not in STOPWORDS and not wordnet.may_be_inflected(s)
                 and wordnet.first_synset(s, p) == sense)
    return (p, subs) if subs else None


def substitute_synonyms(text: str, wordnet: WordNet, *, seed: int, rate: float,
                        max_substitutions: int) -> Substituted | None:
    """A copy of ``text`` with some content words replaced by WordNet synonyms; None if none is eligible."""
    slots = []
    for m in WORD.finditer(text):
        c = candidates(m.group(), wordnet)
        if c is not None and ARTICLE.search(text, 0, m.start()):  # keep "a"/"an" right
            vowel = m.group()[0] in "aeiou"
            c = (c[0], tuple(s for s in c[1] if (s[0] in "aeiou") == vowel))
        if c is not None and c[1]:
            slots.append((m, *c))
    if not slots:
        return None
    rng = random.Random(f"{seed}\x1f{text}")  # seeded by a string: stable across processes (sha512)
    k = min(max_substitutions, max(1, round(rate * len(slots))))
    chosen = sorted(rng.sample(range(len(slots)), k))
    subs = tuple(Substitution(start=slots[i][0].start(), word=slots[i][0].group(), pos=slots[i][1],
                              replacement=rng.choice(slots[i][2])) for i in chosen)
    out, last = [], 0
    for s in subs:
        out += [text[last : s.start], s.replacement]
        last = s.start + len(s.word)
    return Substituted(text="".join(out) + text[last:], substitutions=subs)


# ---- negation ----------------------------------------------------------------------------------
def negate_predicate(text: str, construction: str, wordnet: WordNet) -> str | None:
    """``text`` with "not" after its copula when it is one of the constructions of the module doc
    (``sentiment`` or ``entailment``), else None."""
    if construction not in ("sentiment", "entailment"):
        raise ValueError(f"negation construction must be sentiment or entailment, got {construction!r}")
    tokens = list(TOKEN.finditer(text))
    low = [t.group().lower() for t in tokens]
    if NOT_CONTRACTED.search(text) or any(w in NEGATIONS for w in low):
        return None
    if any(w in JOINERS or w in CLAUSE_BREAKS for w in low):
        return None
    copulas = [i for i, w in enumerate(low) if w in COPULAS
               or (w in SUBJECT_PRONOUNS and i > 0 and low[i - 1] in SUBJECT_PRONOUNS[w])]
    if len(copulas) != 1 or copulas[0] == 0:
        return None
    c = copulas[0]
    subject = low[:c]
    if any(w in QUANTIFIERS or w[0].isdigit() for w in subject):
        return None  # "13 persons were not killed" need not deny "13 persons were killed"
    if construction == "sentiment" and not _evaluative(subject, low[c + 1 :], wordnet):
        return None
    end = tokens[c].end()
    return f"{text[:end]} not{text[end:]}"


def _evaluative(subject: list[str], predicate: list[str], wordnet: WordNet) -> bool:
    """The predicate is [degree adverb] adjective [final punctuation] and the subject holds no adjective."""
    if any("a" in wordnet.pos_of(w) for w in subject if w.isalpha() and w not in STOPWORDS):
        return False
    rest = predicate[1:] if predicate and predicate[0] in DEGREE else predicate
    if not rest or not all(w in FINAL for w in rest[1:]):
        return False
    adj = rest[0]
    pos = wordnet.pos_of(adj)
    return "a" in pos and "v" not in pos and not wordnet.may_be_inflected(adj)


def append_tautology(text: str) -> str:
    """``text`` + "and false is not true", placed before its final punctuation (module doc)."""
    m = re.search(r"\s*[.!?]+\s*$", text)
    if m is None:
        return f"{text.rstrip()} {TAUTOLOGY}"
    return f"{text[: m.start()]} {TAUTOLOGY}{text[m.start():].rstrip()}"
