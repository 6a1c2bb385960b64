"""A study's claim roles checked against its variants before any compute.

A claim reads the variants that play its roles (StudyConfig.roles, study/claims.py); a role whose
variant the study lacks leaves the claim "not run". That is how a study runs a subset of the claims
(the demo has three variants), but it is also what a misspelled variant does, silently, after hours
of pretraining: a variant ``albret`` trains in full and claims 1-4 come out "not run". So before the
first stage:

- a role that names no variant while a variant that plays no role is a near spelling of it (at most
  one edit per four characters, a swap of two letters counting as one) is an error naming both;
- a role set in ``roles:`` that names no variant is an error (the mapping was written for a reason);
- every other claim that will not run is a note naming the roles it needs, the variants present
  and the closest name, printed by ``encoderlab study`` before it starts;
- ``allow_missing_roles: true`` turns the errors into notes.

A study without variants (a config fragment, e.g. only ``roles:``) is not checked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from encoderlab.config import Config, ConfigError, closest


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClaimRoles(Config):
    """Which variant plays which part in the claims (study/claims.py). The defaults are the names the
    studies' variants use (the built-in claims study's electra has gdes sharing, so it names its two
    sharing roles itself); a study with its own names maps them here, and a role whose variant the
    study lacks leaves its claims "not run". None switches a role off."""

    bert: str | None = "bert"
    albert: str | None = "albert"  # same width and depth as bert (unshare: true for claim 4's second half)
    electra: str | None = "electra"  # the paper's recipe: 1/4-width generator, shared embeddings
    # Claim 3: (bert, albert) pairs at growing widths.
    width_pairs: tuple[tuple[str, str], ...] = (("bert", "albert"), ("bert-w2", "albert-w2"), ("bert-w3", "albert-w3"))
    # Claim 6: the generator's width as a fraction of the discriminator's -> variant.
    generator_sizes: dict[str, str] = dataclasses.field(default_factory=lambda: {
        "1/8": "electra-gen-1-8", "1/4": "electra", "1/2": "electra-gen-1-2", "1": "electra-gen-1"})
    # Claim 7: ELECTRA's ablations.
    electra_15pct: str | None = "electra-15pct"
    replace_mlm: str | None = "replace-mlm"
    all_tokens_mlm: str | None = "all-tokens-mlm"
    # Claim 9: embedding sharing. "shared" is the electra role unless share_shared names another
    # variant (a study whose electra uses gdes, as claims-deep's does, runs a shared one beside it);
    # here None means "the electra role", not "off".
    share_none: str | None = "electra-share-none"
    share_shared: str | None = None
    share_gdes: str | None = "electra-gdes"
    # Claim 10: sentence objectives (the bert role has none).
    nsp: str | None = "bert-nsp"
    sop: str | None = "bert-sop"
    # Claim 11: BERT with mask-proposal masking (masking.scheme: proposal), against electra and bert.
    bert_proposal: str | None = "bert-proposal"
    # Claim 14: bert with the modern options (pre-LN, rotary positions, GeGLU, no biases).
    bert_modern: str | None = "bert-modern"


@dataclass(frozen=True, kw_only=True)
class ArmRoles:
    """The variants that play the arms (docs/studies/claims-arms/study.yaml's names by default)."""

    gpt_bert: str = "gpt-bert"
    clm_then_mlm: str = "clm-then-mlm"
    clm: str = "clm"


ARMS = ArmRoles()


# claim -> the ClaimRoles fields it cannot run without (study/claims.py; optional roles left out).
# "width_pairs" and "generator_sizes" are groups: claim 3 needs one pair, claim 6 three sizes.
REQUIRED: dict[int | str, tuple[str, ...]] = {
    1: ("bert", "albert"), 2: ("bert", "albert"), 3: ("width_pairs",), 4: ("bert", "albert"),
    "5a": ("bert", "electra"), "5b": ("bert", "electra"), 6: ("generator_sizes",),
    7: ("bert", "electra", "all_tokens_mlm"),
    8: ("bert", "electra"), 9: ("share_shared", "share_none"), 10: ("nsp", "sop"), 11: ("bert_proposal", "electra"),
    12: ("bert", "electra"), 13: ("bert", "electra"), 14: ("bert_modern", "bert"),
}
# Claims 15 and 16 (study/claims_arms.py) read the arms by ArmRoles' fixed names beside ClaimRoles' bert;
# claim 17 reads bert and electra and needs the prompting probe (prompt_tasks).
ARM_REQUIRED: dict[int, str] = {15: ARMS.gpt_bert, 16: ARMS.clm_then_mlm}


def role_names(roles: ClaimRoles, field: str) -> dict[str, str]:
    """{role label: variant name} of one ClaimRoles field (groups give one entry per member)."""
    value = getattr(roles, field)
    if field == "share_shared" and value is None:  # None here means "the electra role"
        value = roles.electra
    if field == "width_pairs":
        return {f"width_pairs[{i}][{j}]": n for i, pair in enumerate(value) for j, n in enumerate(pair)}
    if field == "generator_sizes":
        return {f"generator_sizes[{k}]": n for k, n in value.items()}
    return {field: value} if value is not None else {}


def check_roles(present: list[str], roles: ClaimRoles, *, prompting: bool, allow_missing: bool) -> list[str]:
    """Notes on the claims a study of these variants (``present``: their names) will not run; raises
    ConfigError where a role looks misspelled or was mapped to a variant the study lacks (unless
    ``allow_missing``). ``prompting``: the study runs the prompting probe (prompt_tasks)."""
    if not present:
        return []
    all_roles = {label: n for f in _fields() for label, n in role_names(roles, f).items()}
    arm_roles = {f"arms.{f.name}": getattr(ARMS, f.name) for f in dataclasses.fields(ARMS)}
    unused = [n for n in present if n not in all_roles.values() and n not in arm_roles.values()]
    defaults = ClaimRoles()
    errors, notes = [], []
    labels_of: dict[str, list[str]] = {}
    for label, name in all_roles.items():
        if name not in present:
            labels_of.setdefault(name, []).append(label)
    for name, labels in labels_of.items():
        typo = next((u for u in unused if _near(name, u)), None)
        fields = sorted({label.split("[")[0] for label in labels})
        claims = ", ".join(str(c) for c, needed in REQUIRED.items() if set(needed) & set(fields))
        if typo is not None:
            errors.append(f"claim(s) {claims} need a variant {name!r} (role {', '.join(labels)}); the study has "
                          f"none, but has {typo!r}, which plays no role: a misspelling? Rename the variant, or map "
                          f"the role to it with roles: {{{fields[0]}: ...}}")
        elif any(getattr(roles, f) != getattr(defaults, f) for f in fields):
            errors.append(f"roles.{labels[0]} names {name!r}, which is not a variant{_closest(name, present)}")
    for claim, needed in REQUIRED.items():
        missing = _missing(roles, needed, present)
        if missing:
            notes.append(f"claim {claim} will not run: it needs " + ", ".join(
                f"{label} = {name!r}{_closest(name, present)}" for label, name in missing.items()))
    for claim, arm in ARM_REQUIRED.items():
        if arm not in present or roles.bert not in present:
            lacking = [n for n in (arm, roles.bert) if n not in present]
            notes.append(f"claim {claim} will not run: it needs the variant(s) {lacking}")
    if not prompting or roles.bert not in present or roles.electra not in present:
        notes.append("claim 17 will not run: it needs bert and electra and the prompting probe (prompt_tasks)")
    if unused:
        notes.append(f"variant(s) {unused} play no role in any claim (roles: "
                     f"{sorted(set(all_roles.values()) | set(arm_roles.values()))})")
    if errors and not allow_missing:
        raise ConfigError("claim roles: " + "; ".join(errors) + f". Variants present: {present}. Fix the name, map "
                          "the role in roles:, or set allow_missing_roles: true to run without those claims")
    return errors + notes


def _fields() -> list[str]:
    return [f.name for f in dataclasses.fields(ClaimRoles)]


def _missing(roles: ClaimRoles, needed: tuple[str, ...], present: list[str]) -> dict[str, str]:
    """The roles of ``needed`` whose variants are absent; {} when the claim can run (or is off)."""
    out: dict[str, str] = {}
    for field in needed:
        names = role_names(roles, field)
        if not names:
            return {}  # a role switched off (None): the claim is off, nothing is missing
        have = [n for n in names.values() if n in present]
        if field == "width_pairs":
            pairs = getattr(roles, field)
            if any(b in present and a in present for b, a in pairs):
                continue
            out.update({k: n for k, n in names.items() if n not in present})
        elif field == "generator_sizes":
            if len(have) < 3:
                out.update({k: n for k, n in names.items() if n not in present})
        elif not have:
            out.update(names)
    return out


def _closest(name: str, present: list[str]) -> str:
    near = closest(name, present)
    return f" (closest variant: {near!r})" if near else ""


def _near(a: str, b: str) -> bool:
    """Whether b is a misspelling of a: an optimal-string-alignment distance (insertions, deletions,
    substitutions, swaps of neighbours) of at most one per four characters of a, and at least one."""
    return _osa(a, b) <= max(1, len(a) // 4)


def _osa(a: str, b: str) -> int:
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]
