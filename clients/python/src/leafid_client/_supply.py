"""One id stream's state, shared by the blocking and the asyncio client: no I/O, no waiting.

- :func:`next_size`: the demand rule, the size of the next request (pure).
- :func:`catch_up_count`: the size of a request that follows an answer lying behind the floor.
- :class:`SupplyCore`: the double buffer of ranges, the floor and the counters.

**The local path.** The ids in use are one *piece* of a range, held as a range iterator,
``iter(range(first, last + 1))``. A caller takes an id with ``next(supply.current)``: one C call
that compares the iterator's index with its length and increments it, so the increment and the
compare with the piece's last id are one step, and a spent piece raises ``StopIteration`` (and
stays spent). Only then does the caller switch pieces, under the supply's lock
(:meth:`SupplyCore.advance`, off the common path). A range iterator and not an
``itertools.count`` plus a compare in Python: the same work, but the compare runs in C and the
piece is one object (measured here: 0.64 to 0.67x of ``next(itertools.count())`` against 0.40
to 0.46x for the count and compare). Why that is enough, under the GIL:

- ``next()`` on a range iterator is one C call that runs no Python code and does not release
  the GIL, so two threads never get the same id from one piece, and the ids a piece returns
  increase in the order the calls happen. Past its end it only raises, so no id is handed out
  twice and none outside the piece.
- The pieces a supply makes current strictly increase: pieces of one batch are its runs (cut
  where the refill must start), in order; every batch holds only ids above the *floor* (the
  largest id accepted before it). A piece is replaced only after a caller found it spent, under
  the lock, so when a call B starts after a call A returned id ``a``, B reads either A's piece,
  which is past ``a`` (B gets more, or finds it spent and moves on to a later piece), or a
  later piece, all of whose ids are above ``a``.
- Reading ``supply.current`` is one attribute load, atomic under the GIL, and the piece is one
  object: a caller never pairs one piece's counter with another's end.

On a free-threaded build (``python3.13t``, GIL disabled) ``next()`` on a shared iterator is not
guaranteed atomic, so the clients take the supply's lock on every call there (:data:`LOCK_FREE`
is false); the rules hold, the local path is slower.

**The floor.** The servers of one database lease disjoint ids, but ids leased by another server
are not ordered relative to what this client already received (after a failover the new server
may still serve a lower segment; another snowflake worker may be behind in time). Every batch is
cut to its ids above the floor; the cut ids count in ``discarded_ids``. An answer wholly at or
below the floor starts the catch-up (:func:`catch_up_count`).

**Strict tags (issue 45): pass-through.** A strict tag's ids are in real-time order across
servers: every id is greater than every id whose answer was complete before its request was
sent. A local buffer would break that between two client processes (P1 holds 100..150 and hands
out 100; P2 gets 200; P1 then hands out 101 to a call that began after P2's answer). So the
first answer with ``"strict": true`` switches the supply to pass-through for good
(:meth:`SupplyCore.go_strict`): every id it holds, and the ids of that answer (they may have
been fetched before some waiting call began), are dropped and counted in ``discarded_ids``; no
refill or preload starts again (:meth:`SupplyCore.begin_refill`); each later call sends its own
request for one id (:meth:`SupplyCore.pass_through`). Why that keeps the rule: the id a call
returns was issued by the server after that call began, so the server's order covers it. As a
second line, a call refuses (discards, and asks again) an id at or below the floor it read when
it began: every id accepted before that was complete before its request was sent, so a correct
server never answers such an id, and one that did (an older server) never reaches the caller.
"""

from __future__ import annotations

import operator
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional, Union

from ._wire import Run
from .errors import RejectedError, ServerFault, ThrottledError

LOCK_FREE = bool(getattr(sys, "_is_gil_enabled", lambda: True)())
"""Whether the GIL makes ``next()`` on a shared counter atomic (false on a free-threaded build
running without the GIL: the clients then lock every call)."""

PRELOAD_FRACTION = 10
"""The next batch is fetched once 1/10 of the current one is used."""


def next_size(
    current: int,
    *,
    size: int,
    used: int,
    elapsed: float,
    starved: bool,
    target: float,
    minimum: int,
    maximum: int,
) -> int:
    """The demand rule: the ids of the next request, from the size asked so far (``current``)
    and the batch in use (``size`` ids, ``used`` of them handed out in ``elapsed`` seconds since
    it became current). Its projected lifetime ``elapsed * size / used`` (``used`` at least 1,
    ``elapsed`` at least 1 ms) below half the ``target``, or a starved supply (a caller waited
    because both batches were spent), doubles the size; above twice the target halves it;
    always within ``minimum..=maximum``. With no batch in use (``size`` 0) only starvation
    changes it (``clients/conformance/vectors/batch.json``)."""
    if starved:
        current *= 2
    elif size > 0:
        lifetime = max(elapsed, 0.001) * size / max(used, 1)
        if lifetime < target / 2:
            current *= 2
        elif lifetime > target * 2:
            current //= 2
    return min(max(current, minimum), maximum)


def catch_up_count(floor: int, last: int, size: int, limit: int) -> int:
    """The catch-up rule: after an answer lying wholly at or below the floor (its server is
    behind the one used before: a lower segment of a lagging or restored database, or snowflake
    ids of older ticks), the next request follows at once, without a pause, for enough ids to
    pass the floor: those from the answer's ``last`` id up to the floor, plus the current
    ``size``, at most ``limit`` (the route's). A segment server's next ids follow its last ones,
    so a gap within ``limit`` is passed in one request. It does not change the size."""
    return max(min(floor - last + size, limit), min(size, limit))


@dataclass(frozen=True)
class Stats:
    """Counters of one client (summed over its supplies) or of one supply."""

    ids_served: int = 0
    """Ids handed to callers."""
    batches: int = 0
    """200 answers whose ids were taken into a local buffer (at least one above the floor)."""
    failovers: int = 0
    """Times a request went to another server because the one asked failed (client-wide;
    always 0 in a supply's stats)."""
    discarded_ids: int = 0
    """Ids received in 200 answers but never handed out: not above the supply's floor."""
    ids_received: int = 0
    """Ids received in valid 200 answers, discarded ones included."""
    failed_rounds: int = 0
    """Fetch rounds in which no server delivered a batch."""
    batch_size: int = 0
    """Ids the supply's next request asks for (it follows demand); in a client's stats, the
    largest of its supplies."""

    def __add__(self, other: "Stats") -> "Stats":
        return Stats(
            self.ids_served + other.ids_served,
            self.batches + other.batches,
            self.failovers + other.failovers,
            self.discarded_ids + other.discarded_ids,
            self.ids_received + other.ids_received,
            self.failed_rounds + other.failed_rounds,
            max(self.batch_size, other.batch_size),
        )


def _spent() -> "Iterator[int]":
    """An empty piece: the state before the first batch and after close."""
    return iter(range(0))


class SupplyCore:
    """One id stream's state: the piece in use, the rest of the current batch, at most one next
    batch, the floor, the size of the next request.

    Not locked itself: ``current`` is read without a lock by the local path (see the module's doc);
    every method runs under the blocking supply's lock, or on the asyncio loop.
    """

    __slots__ = (
        "current",
        "current_size",
        "rest",
        "ahead",
        "floor",
        "refilling",
        "refused",
        "last_fault",
        "served_before",
        "batch_start",
        "batch_ids",
        "preload_at",
        "promoted_at",
        "batches",
        "received",
        "discarded",
        "failed_rounds",
        "count",
        "min_count",
        "max_count",
        "target",
        "limit",
        "starved",
        "chunk",
        "clock",
        "strict",
    )

    def __init__(
        self,
        min_count: int = 1,
        max_count: int = 1,
        target: float = 1.0,
        limit: int = 1_000_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.current: Iterator[int] = _spent()
        """The piece being handed out: a range iterator (``next()`` takes an id)."""
        self.current_size = 0
        """Ids of ``current`` when it became current."""
        self.rest: List[Run] = []
        """The runs of the current batch after ``current``, reversed (the next one is last)."""
        self.ahead: Optional[List[Run]] = None
        """The batch to serve after the current one, once fetched."""
        self.floor = 0
        """The largest id accepted into a batch (0 before the first: ids are positive)."""
        self.refilling = False
        """True while a refill runs (single flight)."""
        self.refused: Optional[Union[RejectedError, ThrottledError]] = None
        """The refusal of the last refill; cleared when a refill starts."""
        self.last_fault: Optional[ServerFault] = None
        """The last server failure of the refills; cleared by a batch."""
        self.served_before = 0
        """Ids handed out from the pieces before ``current``."""
        self.batch_start = 0
        """``served_before`` when the current batch became current."""
        self.batch_ids = 0
        """Ids of the current batch."""
        self.preload_at = -1
        """Ids of the current batch handed out when the refill starts (-1: started)."""
        self.promoted_at = clock()
        """When the current batch became current."""
        self.batches = 0
        self.received = 0
        self.discarded = 0
        self.failed_rounds = 0
        self.count = min(min_count, limit)
        """Ids the next request asks for (:func:`next_size`)."""
        self.min_count = min(min_count, limit)
        self.max_count = min(max_count, limit)
        self.target = target
        self.limit = limit
        """The route's most ids per request."""
        self.starved = False
        """A caller found both batches spent since the last refill started (after the first)."""
        self.chunk = 0
        """When above 0, pieces made current while a refill runs (or starts) hold at most this
        many ids: the asyncio client's, so a caller that never awaits still yields to the refill
        now and then (between two pieces)."""
        self.clock = clock
        self.strict = False
        """Pass-through (a strict tag, see the module's doc): no local buffer, one request per
        id. Set for good by :meth:`go_strict`."""

    def advance(self) -> "tuple[bool, bool]":
        """Called when ``current`` is spent: makes the next piece current, from the current
        batch or else from the next batch. Returns whether there was one, and whether to start
        the refill (the current batch's preload mark was reached and no next batch is there)."""
        self.served_before += self.current_size
        self.current_size = 0
        rest = self.rest
        if not rest:
            nxt = self.ahead
            if nxt is None:
                self.current = _spent()
                return False, False
            self.ahead = None
            rest = self.rest = nxt[::-1]
            self.batch_start = self.served_before
            self.batch_ids = sum(last - first + 1 for first, last in nxt)
            self.preload_at = self.batch_ids // PRELOAD_FRACTION
            self.promoted_at = self.clock()
        first, last = rest.pop()
        used = self.served_before - self.batch_start
        refill = False
        if 0 <= self.preload_at <= used:
            self.preload_at = -1
            refill = self.ahead is None
        cut = last
        if self.preload_at > used:
            cut = min(cut, first + (self.preload_at - used) - 1)
        if self.chunk > 0 and (refill or self.refilling):
            cut = min(cut, first + self.chunk - 1)
        if cut < last:
            rest.append((cut + 1, last))
        self.current_size = cut - first + 1
        self.current = iter(range(first, cut + 1))
        return True, refill

    def taken(self) -> int:
        """Ids handed out from ``current`` (its length hint is what is left)."""
        return self.current_size - operator.length_hint(self.current)

    def take(self) -> "tuple[Optional[int], bool]":
        """The next id (``None`` when both batches are spent) and whether to start a refill. The
        clients' local path does the first step inline; this is the slow path's."""
        refill = False
        while True:
            try:
                return next(self.current), refill
            except StopIteration:
                pass
            more, start = self.advance()
            refill = refill or start
            if not more:
                return None, refill

    def begin_refill(self) -> bool:
        """Whether a refill should start now (none runs and no next batch); if so, marks one
        running, clears the last refusal, and sizes its request (:func:`next_size`)."""
        if self.strict or self.refilling or self.ahead is not None:
            # A strict supply never fetches ahead: a buffered id could be below one another
            # client handed out after it was fetched.
            return False
        self.refilling = True
        self.refused = None
        if self.batches:
            self.count = next_size(
                self.count,
                size=max(self.batch_ids, 1),
                used=self.used(),
                elapsed=self.clock() - self.promoted_at,
                starved=self.starved,
                target=self.target,
                minimum=self.min_count,
                maximum=self.max_count,
            )
        self.starved = False
        return True

    def used(self) -> int:
        """Ids of the current batch handed out."""
        return self.served_before - self.batch_start + self.taken()

    def starve(self) -> None:
        """A caller found both batches spent and must wait: the next request asks for more (not
        for the first batch: an empty supply is no sign of demand)."""
        if self.batches:
            self.starved = True

    def accept(self, runs: List[Run]) -> Optional[int]:
        """Takes a validated batch as the next one, cut to its ids above the floor. Returns
        ``None`` when kept, else the batch's last id: none lay above the floor, that server is
        behind (the caller asks again, :func:`catch_up_count`). An answer marked strict is not
        kept: the supply turns to pass-through (:meth:`go_strict`) and ``None`` is returned (the
        refill ends; the waiting callers each fetch their own id)."""
        floor = self.floor
        got = sum(last - first + 1 for first, last in runs)
        if getattr(runs, "strict", False):
            self.go_strict(got, runs[-1][1])
            return None
        self.received += got
        if runs[-1][1] <= floor:
            self.discarded += got
            return runs[-1][1]
        if runs[0][0] <= floor:
            kept: List[Run] = []
            for first, last in runs:
                if last <= floor:
                    continue
                kept.append((max(first, floor + 1), last))
            self.discarded += got - sum(last - first + 1 for first, last in kept)
            runs = kept
        assert self.ahead is None, "single flight: one refill fills ahead"
        self.floor = runs[-1][1]
        self.ahead = runs
        self.last_fault = None
        self.batches += 1
        return None

    def retry(self, server: str, behind: int) -> "tuple[int, bool]":
        """After an answer :meth:`accept` did not keep (its last id ``behind`` at or below the
        floor): records why, and returns the count of the next request (the catch-up, at once)
        and whether to pause first (never)."""
        self.last_fault = ServerFault(
            server,
            "behind",
            f"its ids (up to {behind}) lie at or below the last id received ({self.floor})",
        )
        return catch_up_count(self.floor, behind, self.count, self.limit), False

    def go_strict(self, got: int, last: int) -> None:
        """Turns the supply to pass-through for good, after an answer of ``got`` ids up to
        ``last`` marked strict: that answer's ids and every id held locally are dropped (counted
        in ``discarded_ids``: never handed out, and never reused by a server); the floor rises
        to ``last``. Safe: dropping ids never breaks a rule, and from now on :meth:`take` finds
        nothing (no piece, no next batch) and :meth:`begin_refill` starts nothing."""
        held = operator.length_hint(self.current) + sum(b - a + 1 for a, b in self.rest)
        if self.ahead is not None:
            held += sum(b - a + 1 for a, b in self.ahead)
        self.received += got
        self.discarded += got + held
        self.floor = max(self.floor, last)
        self.strict = True
        self.drop()

    def pass_through(self, server: str, runs: List[Run], floor: int) -> Optional[int]:
        """The id of one pass-through answer (a request for one id sent after the call read
        ``floor``, the supply's floor when it began), counted as served; ``None`` when the
        answer lies at or below ``floor`` (an id whose answer was complete before this call's
        request was sent: a correct strict server never gives one, so it is discarded and the
        call asks again). A longer answer than asked cannot pass validation; ids past the first
        would be discarded all the same (one call, one id)."""
        got = sum(last - first + 1 for first, last in runs)
        self.received += got
        self.batches += 1
        first = runs[0][0]
        if first <= floor:
            self.discarded += got
            self.last_fault = ServerFault(
                server, "behind", f"its id {first} lies at or below an id handed out before ({floor})"
            )
            return None
        self.discarded += got - 1
        self.floor = max(self.floor, first)
        self.served_before += 1
        self.last_fault = None
        return first

    def drop(self) -> None:
        """Drops the local batches (a closed client hands out nothing more): the local path
        finds the piece spent and the slow path raises."""
        self.served_before += self.taken()
        self.current_size = 0
        self.current = _spent()
        self.rest = []
        self.ahead = None

    def stats(self) -> Stats:
        """This supply's counters (``batch_size``: what the next request asks for)."""
        return Stats(
            ids_served=self.served_before + self.taken(),
            batch_size=self.count,
            batches=self.batches,
            discarded_ids=self.discarded,
            ids_received=self.received,
            failed_rounds=self.failed_rounds,
        )
