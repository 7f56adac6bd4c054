"""A formatted tag's id stream, shared by the blocking and the asyncio client: no I/O, no waiting.

A formatted tag (``docs/shapes.md``) hands out text, e.g. order numbers ``20261127000123`` that
restart daily in a named zone. Its batches come from the list route
(``GET /api/v1/segment/{tag}/ids?count=N``) as texts of one period, with the period's end. The
rules are the numeric supply's (:mod:`leafid_client._supply`), for text:

- **Two batches**, each with its ``period_end``; the next one is fetched in the background once
  10% of the current one is used; its size follows demand (:func:`~._supply.next_size`) within
  ``batch`` and 100,000 (the route's limit).
- **The period rule: never yesterday's number today.** Before an id is handed out, its batch's
  period is checked: a batch whose period has ended is dropped whole, and its ids count in
  ``discarded_ids``. A server never answers ids of a period that ended by its own clock; this
  covers the time a batch spends in the client. With an injected ``clock`` setting (``wall``)
  that clock is read per text and compared with ``period_end`` (tests move a period's end with
  it). With the default (``time.time``) no clock is read per text (issue 47: a clock read is a
  system call where the VM's vDSO falls back to it, about 180 ns for ``time.time()`` on the
  bench machine, more than the rest of the local path): at receipt, the period's deadline is
  ``period_end - time.time()`` on the monotonic clock, and one daemon thread
  (:data:`DEADLINES`) sets the period's *ended flag* (a one-element list) then; the local path
  reads ``flag[0]``. **Bound**: the flag is set at most the thread's wake-up latency after
  ``period_end`` by the wall clock as it ran at receipt (under the GIL: up to the switch
  interval, 5 ms, plus scheduling); a caller sees it at its next text. A wall clock stepped
  forward by D after receipt is not seen by the deadline: texts may be handed out up to D after
  ``period_end`` by the stepped clock, until the next batch is promoted (:meth:`advance`
  reads the wall clock) or a new period's answer arrives (its deadline is computed from the
  wall clock at its receipt). A clock stepped back only sets the flag early (texts dropped,
  never late). Batches of one period share one flag (one deadline per period, not per batch).
- **The floor** is the largest text accepted into a batch: texts of one format sort as byte
  strings in issue order (fixed widths, ASCII alphabets), so ids at or below it are cut and
  counted in ``discarded_ids``, as numbers are. (Python compares ``str`` by code point, which
  is the byte order of their UTF-8 encodings.)
- **Unordered answers** (``"ordered": false``, a permuted tag such as ``T-9F3K2Q``): their
  order is hidden on purpose, so such a batch is taken whole, with no floor, and its texts are
  handed out in the order received; uniqueness is the server's, as for every id. The period
  rule still holds, so ``discarded_ids`` counts only texts of an ended period for them. The
  local path is the same as for ordered batches (nothing is checked per text), so the rule
  below that each text of a piece goes to exactly one caller holds for them too: the client
  never hands a text out twice; only "a later call gets a larger text" is given up.

**The local path.** The texts in use are one *piece* of a batch: ``current`` is one tuple
``(iterator over a list of texts, period_end)``. A caller loads the tuple (one attribute load,
atomic under the GIL, so an iterator is never paired with another batch's end), takes a text
with ``next()`` (one C call: no two callers get the same text, and a piece hands its texts out
in order), then loads the piece's ended flag (``flag[0]``: no clock read with the default
clock). A spent piece raises ``StopIteration`` and a
caller then switches pieces under the supply's lock (:meth:`FormattedCore.take`), as in the
numeric supply, whose module doc gives why the pieces a supply makes current strictly increase.

A text a caller took whose period had ended is never returned: the caller counts it as
discarded under the lock (:meth:`FormattedCore.late`) and drops the rest of its batch. The drop
empties the piece's iterator in one C call (``list(it)``), so each text of the piece is either
taken by exactly one caller (who returns it or counts it) or drained and counted here: the
counts are exact.
"""

from __future__ import annotations

import bisect
import heapq
import math
import operator
import threading
import time
from typing import Any, Callable, Iterator, List, Optional, Tuple, Union

from ._supply import PRELOAD_FRACTION, Stats, next_size
from ._wire import FormattedBatch
from .errors import RejectedError, ServerFault, ThrottledError

Piece = Tuple[Iterator[str], Any]
"""Texts being handed out and their period's *ended flag*: ``flag[0]`` is true once the period
has ended (a one-element list set by :data:`DEADLINES` with the default clock; a
:class:`_ClockCheck` reading an injected clock otherwise)."""


class _ClockCheck:
    """The ended flag of a period under an injected clock: ``check[0]`` reads that clock and
    compares it with ``period_end`` (the clock is the test's: read per text, as it asks)."""

    __slots__ = ("wall", "end")

    def __init__(self, wall: Callable[[], float], end: float) -> None:
        self.wall = wall
        self.end = end

    def __getitem__(self, _: int) -> bool:
        return self.wall() >= self.end


class _Deadlines:
    """One daemon thread that sets periods' ended flags at their deadlines, on the monotonic
    clock (``threading.Condition.wait`` times out on it). Armed once per period per supply, so
    its heap holds one entry per period in use, not one per batch. The thread runs only while
    some deadline is armed: a closed supply cancels its own (:meth:`cancel`), and the thread
    ends with the last one, so a closed client leaves no thread behind."""

    LONGEST = 3600.0
    """The longest single wait (a wait far in the future is taken in steps of this)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: List[Tuple[float, int, List[bool]]] = []
        self._seq = 0
        self._thread: Optional[threading.Thread] = None

    def arm(self, left: float, flag: List[bool]) -> None:
        """Sets ``flag[0]`` ``left`` seconds from now (at once if not positive; never if not
        finite: a period that never ends)."""
        if left <= 0:
            flag[0] = True
            return
        if not math.isfinite(left):
            return
        at = time.monotonic() + left
        with self._cond:
            heapq.heappush(self._heap, (at, self._seq, flag))
            self._seq += 1
            if self._thread is None or not self._thread.is_alive():  # none yet, or forked
                self._thread = threading.Thread(
                    target=self._run, name="leafid-period-deadlines", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def cancel(self, flag: List[bool]) -> None:
        """Drops the deadlines armed on ``flag`` (its supply is closed); when none is left, waits
        for the thread to end."""
        with self._cond:
            kept = [e for e in self._heap if e[2] is not flag]
            if len(kept) == len(self._heap):
                return
            heapq.heapify(kept)
            self._heap = kept
            self._cond.notify()
            thread = self._thread if not kept else None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        with self._cond:
            while self._heap:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    heapq.heappop(self._heap)[2][0] = True
                if self._heap:
                    self._cond.wait(min(self._heap[0][0] - now, self.LONGEST))
            self._thread = None


DEADLINES = _Deadlines()
"""The period deadlines of every formatted supply of this process (default clock)."""

_NEVER: List[bool] = [False]
"""The ended flag of the empty piece (never set: the piece holds nothing)."""

EXPIRED = "expired"
"""What :meth:`FormattedCore.accept` returns for an answer whose period had already ended by
the client's clock (its server's clock is behind)."""


def _spent() -> Piece:
    """An empty piece: the state before the first batch and after close."""
    return iter(()), _NEVER


class FormattedCore:
    """One formatted tag's state: the piece in use, the rest of the current batch, at most one
    next batch, the floor (a text), the size of the next request, the counters.

    Not locked itself: ``current`` is read without a lock by the local path (see the module's
    doc); every method runs under the blocking supply's lock, or on the asyncio loop. Its surface
    is the numeric :class:`~._supply.SupplyCore`'s, so both clients drive either one."""

    strict = False
    """Formatted tags are never strict (a strict tag is numbers only): never pass-through."""

    __slots__ = (
        "current",
        "current_size",
        "rest",
        "rest_at",
        "rest_end",
        "rest_flag",
        "ahead_flag",
        "period_flag",
        "armed",
        "ahead",
        "floor",
        "refilling",
        "refused",
        "last_fault",
        "served_before",
        "lost",
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
        "wall",
    )

    def __init__(
        self,
        min_count: int = 1,
        max_count: int = 1,
        target: float = 1.0,
        limit: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.current: Piece = _spent()
        """The piece being handed out and its period's end."""
        self.current_size = 0
        """Texts of ``current`` when it became current."""
        self.rest: List[str] = []
        """The current batch's texts; those from ``rest_at`` on are not yet in a piece."""
        self.rest_at = 0
        self.rest_end = math.inf
        """The current batch's ``period_end``."""
        self.rest_flag: Any = _NEVER
        """The current batch's ended flag (see ``Piece``)."""
        self.ahead_flag: Any = _NEVER
        """The next batch's ended flag."""
        self.period_flag: Tuple[float, Any] = (math.nan, _NEVER)
        """The last period's ``period_end`` and its flag, shared by the batches of that period."""
        self.armed: List[List[bool]] = []
        """Flags this supply armed that may still have a deadline in :data:`DEADLINES`
        (cancelled by :meth:`drop`)."""
        self.ahead: Optional[FormattedBatch] = None
        """The batch to serve after the current one, once fetched."""
        self.floor = ""
        """The largest text accepted into a batch ("" before the first: ids are non-empty)."""
        self.refilling = False
        self.refused: Optional[Union[RejectedError, ThrottledError]] = None
        self.last_fault: Optional[ServerFault] = None
        self.served_before = 0
        """Texts taken from the pieces before ``current`` (handed out, late or drained)."""
        self.lost = 0
        """Texts taken from pieces but never handed out: late or drained (period ended)."""
        self.batch_start = 0
        self.batch_ids = 0
        self.preload_at = -1
        self.promoted_at = clock()
        self.batches = 0
        self.received = 0
        self.discarded = 0
        self.failed_rounds = 0
        self.count = min(min_count, limit)
        self.min_count = min(min_count, limit)
        self.max_count = min(max_count, limit)
        self.target = target
        self.limit = limit
        self.starved = False
        self.chunk = 0
        """As the numeric supply's: when above 0, pieces made while a refill runs hold at most
        this many texts (the asyncio client's)."""
        self.clock = clock
        """Monotonic seconds, for the demand rule."""
        self.wall = wall
        """Seconds since the epoch, for the period rule: the client's ``clock`` setting."""

    # -- handing out ----------------------------------------------------------------------

    def taken(self) -> int:
        """Texts taken from ``current`` (its length hint is what is left)."""
        return self.current_size - operator.length_hint(self.current[0])

    def used(self) -> int:
        """Texts of the current batch taken."""
        return self.served_before - self.batch_start + self.taken()

    def late(self) -> None:
        """A caller took a text whose period had ended (the clock passed ``period_end`` after it
        loaded the piece): that text is discarded (the rest of its batch is dropped by
        :meth:`expire` when the caller, under the lock, finds it current)."""
        self.lost += 1
        self.discarded += 1

    def expire(self) -> None:
        """Drops what is left of the current batch (its period ended) and counts it."""
        it, flag = self.current
        if flag is _NEVER:
            return
        drained = len(list(it))  # one C call: no caller takes a text of it meanwhile
        self.lost += drained
        left = len(self.rest) - self.rest_at
        self.discarded += drained + left
        self.served_before += self.current_size
        self.current_size = 0
        self.current = _spent()
        self.rest = []
        self.rest_at = 0
        self.rest_end = math.inf
        self.rest_flag = _NEVER

    def advance(self) -> Tuple[bool, bool]:
        """Called when ``current`` is spent: makes the next piece current, from the current
        batch or else from the next batch (dropped whole if its period has ended). Returns
        whether there was one, and whether to start the refill."""
        self.served_before += self.current_size
        self.current_size = 0
        refill = False
        if self.rest_at >= len(self.rest):
            nxt = self.ahead
            if nxt is None:
                self.current = _spent()
                return False, False
            self.ahead = None
            if self.wall() >= nxt.period_end:
                self.discarded += len(nxt.ids)
                self.current = _spent()
                self.rest, self.rest_at = [], 0
                return False, True
            self.rest, self.rest_at, self.rest_end = nxt.ids, 0, nxt.period_end
            self.rest_flag = self.ahead_flag
            self.batch_start = self.served_before
            self.batch_ids = len(nxt.ids)
            self.preload_at = self.batch_ids // PRELOAD_FRACTION
            self.promoted_at = self.clock()
        rest, first = self.rest, self.rest_at
        used = self.served_before - self.batch_start
        if 0 <= self.preload_at <= used:
            self.preload_at = -1
            refill = self.ahead is None
        cut = len(rest)
        if self.preload_at > used:
            cut = min(cut, first + (self.preload_at - used))
        if self.chunk > 0 and (refill or self.refilling):
            cut = min(cut, first + self.chunk)
        if cut == len(rest):
            # The rest of the batch: an iterator over the batch's own list from ``first`` (no
            # copy of up to 100,000 references).
            it = iter(rest)
            if first:
                it.__setstate__(first)  # type: ignore[attr-defined]
        else:
            it = iter(rest[first:cut])
        self.rest_at = cut
        self.current_size = cut - first
        self.current = (it, self.rest_flag)
        return True, refill

    def take(self) -> Tuple[Optional[str], bool]:
        """The next text (``None`` when both batches are spent or dropped) and whether to start a
        refill: the slow path's, which the local path does inline."""
        refill = False
        while True:
            it, ended = self.current
            try:
                text = next(it)
            except StopIteration:
                more, start = self.advance()
                refill = refill or start
                if not more:
                    if start:
                        continue  # the next batch was dropped: a refill starts
                    return None, refill
                continue
            if not ended[0]:
                return text, refill
            self.late()
            self.expire()

    # -- fetching ---------------------------------------------------------------------------

    def begin_refill(self) -> bool:
        """Whether a refill should start now (none runs and no next batch); if so, marks one
        running, clears the last refusal, and sizes its request (the demand rule)."""
        if self.refilling or self.ahead is not None:
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

    def starve(self) -> None:
        """A caller found both batches spent and must wait: the next request asks for more."""
        if self.batches:
            self.starved = True

    def accept(self, batch: FormattedBatch) -> Optional[str]:
        """Takes a validated batch as the next one, cut to its texts above the floor (an
        unordered batch, ``ordered`` false, is taken whole: no floor for a permuted tag). Returns
        ``None`` when kept; :data:`EXPIRED` when its period had already ended by the client's
        clock (dropped whole); else the batch's last text: none lay above the floor, that server
        is behind (the caller asks again)."""
        ids = batch.ids
        self.received += len(ids)
        now = self.wall()
        if now >= batch.period_end:
            self.discarded += len(ids)
            return EXPIRED
        self.ahead_flag = self.flag_of(batch.period_end, now)
        if not batch.ordered:
            # A permuted tag: its texts show no order, so there is no floor to cut at; they are
            # handed out as received (uniqueness is the server's). The floor is left as it is.
            assert self.ahead is None, "single flight: one refill fills ahead"
            self.ahead = batch
            self.last_fault = None
            self.batches += 1
            return None
        floor = self.floor
        if ids[-1] <= floor:
            self.discarded += len(ids)
            return ids[-1]
        if ids[0] <= floor:
            cut = bisect.bisect_right(ids, floor)
            self.discarded += cut
            batch = FormattedBatch(ids[cut:], batch.period, batch.period_end)
        assert self.ahead is None, "single flight: one refill fills ahead"
        self.floor = batch.ids[-1]
        self.ahead = batch
        self.last_fault = None
        self.batches += 1
        return None

    def flag_of(self, period_end: float, now: float) -> Any:
        """The ended flag of a batch of the period ending at ``period_end``, received at wall
        time ``now``: with an injected clock a :class:`_ClockCheck`; with the default one the
        period's shared flag, armed on first receipt for ``period_end - now`` on the monotonic
        clock (a later answer of the same period reuses it while it is not set: one deadline
        per period)."""
        if self.wall is not time.time:
            return _ClockCheck(self.wall, period_end)
        end, flag = self.period_flag
        # A new period, or this period's flag already set while the wall clock (read at this
        # receipt, ``now < period_end`` here) says it has not ended (a clock stepped back, or a
        # deadline fired early): a fresh flag, armed from this receipt.
        if end != period_end or flag[0]:
            flag = [False]
            DEADLINES.arm(period_end - now, flag)
            self.period_flag = (period_end, flag)
            # Flags already set need their deadline no more (a flag set early may still have
            # one armed); flags not yet set stay armed: batches of their period may be in use.
            for old in [f for f in self.armed if f[0]]:
                DEADLINES.cancel(old)
                self.armed.remove(old)
            self.armed.append(flag)
        return flag

    def retry(self, server: str, answer: object) -> Tuple[int, bool]:
        """After an answer :meth:`accept` did not keep: records why, and returns the count of the
        next request and whether to pause first. A server behind the floor is asked again at
        once for twice the current size, at most the route's 100,000 (a text tells nothing of
        the gap to pass; the size itself does not change); a server whose clock has not reached
        the end of the period that ended by the client's is asked again after the backoff
        pause."""
        if answer == EXPIRED:
            self.last_fault = ServerFault(
                server, "behind", "its period had already ended by this client's clock"
            )
            return self.count, True
        self.last_fault = ServerFault(
            server,
            "behind",
            f"its ids (up to {answer!r}) lie at or below the last id received ({self.floor!r})",
        )
        return min(self.count * 2, self.limit), False

    def drop(self) -> None:
        """Drops the local batches (a closed client hands out nothing more)."""
        self.served_before += self.taken()
        self.current_size = 0
        self.current = _spent()
        self.rest = []
        self.rest_at = 0
        self.rest_flag = _NEVER
        self.ahead = None
        for flag in self.armed:
            DEADLINES.cancel(flag)
        self.armed = []
        self.period_flag = (math.nan, _NEVER)

    def stats(self) -> Stats:
        """This supply's counters (``batch_size``: what the next request asks for)."""
        return Stats(
            ids_served=self.served_before + self.taken() - self.lost,
            batch_size=self.count,
            batches=self.batches,
            discarded_ids=self.discarded,
            ids_received=self.received,
            failed_rounds=self.failed_rounds,
        )
