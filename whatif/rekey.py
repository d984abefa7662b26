"""Recomputing a cassette's keys under the rules and key scheme in force now.

A key is a guess about which parts of a request are load-bearing, and the guess changes: a
rule is added, a profile learns a field, the key scheme moves on. Because every request is
stored as it was sent (secrets already replaced by their markers), its key can be computed
again exactly as the proxy would compute it today. What matters to a user is what that does
to replay: recordings that used to be told apart and now share a key (a *collision*: replay
serves them in recorded order to whichever request comes first) and recordings that shared a
key and now differ (a *split*: a request that hit before may now miss).

A request body too large for the store to load (see storage.blobs.INLINE_LIMIT) keeps its
key: the proxy keys such bodies by their bytes as they stream (addons.uploads), which the
store cannot replay here. Those exchanges are listed as kept.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from freezeframe.canonicalize import SCHEME_VERSION, KeyConfig, canonicalize
from freezeframe.canonicalize.drift import digests
from freezeframe.evidence.requests import stored_view
from freezeframe.storage import Exchange, KeyChange, Rekeyed, WriteStore


@dataclass(frozen=True, slots=True)
class KeyGroup:
    """Recordings that one key now joins (a collision) or that one key used to join (a split)."""

    key: str
    seqs: tuple[int, ...]
    other_keys: tuple[str, ...]
    """The keys they had before (a collision) or have now (a split)."""


@dataclass(frozen=True, slots=True)
class RekeyReport:
    cassette: str
    written: bool
    """False for a dry run: nothing in the store changed."""
    checked: int
    changed: tuple[KeyChange, ...]
    """Exchanges whose key or occurrence changed."""
    collisions: tuple[KeyGroup, ...]
    splits: tuple[KeyGroup, ...]
    kept: tuple[int, ...] = field(default=())
    """Seqs whose request body is too large to re-key here; their key is unchanged."""


def rekey(
    store: WriteStore, cassette: str, config: KeyConfig, *, dry_run: bool = False
) -> RekeyReport:
    """Recompute every key of ``cassette``; unless ``dry_run``, write them and re-chain.

    Raises CassetteNotFound, or StoreError when the cassette's chain is already broken:
    re-chaining it would bury the evidence.
    """
    kept: list[int] = []
    changes = store.rekey(cassette, _keyer(config, kept), dry_run=dry_run)
    return _report(cassette, not dry_run, changes, kept)


def _keyer(config: KeyConfig, kept: list[int]) -> Callable[[Exchange], Rekeyed]:
    def key(exchange: Exchange) -> Rekeyed:
        if exchange.recorded.request_body_ref is not None:
            kept.append(exchange.seq)
            stripped = exchange.recorded.stripped if exchange.recorded.stripped is not None else {}
            return Rekeyed(
                exchange.recorded.key,
                exchange.recorded.key_scheme,
                exchange.recorded.canonical,
                stripped,
            )
        canonical = canonicalize(stored_view(exchange), config)
        return Rekeyed(canonical.key, SCHEME_VERSION, canonical.form, digests(canonical.stripped))

    return key


def _report(
    cassette: str, written: bool, changes: Iterable[KeyChange], kept: list[int]
) -> RekeyReport:
    changes = list(changes)
    by_new: defaultdict[str, list[KeyChange]] = defaultdict(list)
    by_old: defaultdict[str, list[KeyChange]] = defaultdict(list)
    for change in changes:
        by_new[change.new_key].append(change)
        by_old[change.old_key].append(change)
    return RekeyReport(
        cassette=cassette,
        written=written,
        checked=len(changes),
        changed=tuple(
            c for c in changes if c.old_key != c.new_key or c.old_occurrence != c.new_occurrence
        ),
        collisions=_groups(by_new, lambda c: c.old_key),
        splits=_groups(by_old, lambda c: c.new_key),
        kept=tuple(kept),
    )


def _groups(
    grouped: dict[str, list[KeyChange]], other: Callable[[KeyChange], str]
) -> tuple[KeyGroup, ...]:
    """The groups whose members disagree on the other key, in order of first seq."""
    return tuple(
        KeyGroup(key, tuple(c.seq for c in members), tuple(dict.fromkeys(map(other, members))))
        for key, members in grouped.items()
        if len({other(c) for c in members}) > 1
    )


def report_lines(report: RekeyReport) -> Iterator[str]:
    """What ``rekey`` prints (rich markup): the counts, each collision and split, and the
    exchanges it had to leave as they were."""
    verb = "changed" if report.written else "would change"
    yield (
        f"{report.cassette}: {report.checked} exchanges re-keyed, {len(report.changed)} {verb}, "
        f"{len(report.collisions)} collisions, {len(report.splits)} splits"
    )
    for title, groups, other in (
        ("collision", report.collisions, "had keys"),
        ("split", report.splits, "now keys"),
    ):
        for group in groups:
            seqs = ", ".join(f"#{seq}" for seq in group.seqs)
            keys = ", ".join(key[:16] for key in group.other_keys)
            yield f"  [yellow]{title}[/] {group.key[:16]}: {seqs} ({other} {keys})"
    if report.kept:
        kept = ", ".join(f"#{seq}" for seq in report.kept)
        yield f"  kept (request body too large to re-key here): {kept}"
