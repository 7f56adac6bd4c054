//! The filler of the cached generator: one thread that, on request, puts ids into the ring up
//! to full, never more than `max_ahead_ticks` past the clock and never past the layout's time
//! field, moving to the next clock-back era when the clock stepped back (see [`super`]).

use super::*;

impl Shared {
    /// Wakes the filler unless a refill is already requested; costs one load when it is.
    pub(super) fn request_fill(&self) {
        // Relaxed pre-check: avoids a write to a shared line on every low-ring take.
        if self.fill_requested.load(Ordering::Relaxed) {
            return;
        }
        // AcqRel: the filler's Acquire load sees the request along with the ring state
        // that prompted it.
        if self.fill_requested.swap(true, Ordering::AcqRel) {
            return;
        }
        let _g = lock(&self.filler_wake.0);
        self.filler_wake.1.notify_one();
    }

    /// The filler thread: park until asked (or the schedule fires), then fill; until stopped.
    pub(super) fn run_filler(&self) {
        loop {
            {
                let mut guard = lock(&self.filler_wake.0);
                loop {
                    // Acquire: see everything `shutdown` did before setting the flag.
                    if self.stopping.load(Ordering::Acquire) {
                        tracing::debug!("snowflake filler stopped");
                        return;
                    }
                    // Acquire: pairs with the request's swap.
                    if self.fill_requested.load(Ordering::Acquire) {
                        break;
                    }
                    match self.schedule_interval {
                        Some(every) => {
                            let (g, timeout) = self
                                .filler_wake
                                .1
                                .wait_timeout(guard, every)
                                .unwrap_or_else(PoisonError::into_inner);
                            guard = g;
                            if timeout.timed_out() {
                                break;
                            }
                        }
                        None => {
                            guard = self
                                .filler_wake
                                .1
                                .wait(guard)
                                .unwrap_or_else(PoisonError::into_inner);
                        }
                    }
                }
            }
            // Release: a request after this store is seen by the next pass's check.
            self.fill_requested.store(false, Ordering::Release);
            self.fill(true);
        }
    }

    /// Puts ids until the ring is full; returns how many. Waits for the clock when the next
    /// tick is too far ahead and `wait_for_clock` is set, else stops there.
    pub(super) fn fill(&self, wait_for_clock: bool) -> u64 {
        let max_tick = self.layout.max_time_delta();
        // Relaxed: this thread is the only writer of `next_pos`.
        let mut pos = self.next_pos.load(Ordering::Relaxed);
        let mut now_tick = self.now_tick();
        // Catch up with the clock: positions advance only as ids are used, so after a quiet
        // spell the next tick would lie as far behind the clock as the server was idle, and a
        // client failing over from a busy server would find this one's ids far below what it
        // already handed out. Skipping ticks never repeats an id (positions only grow) and
        // stays within the clock, so within any lease.
        if pos >> self.seq_bits < now_tick {
            pos = now_tick << self.seq_bits;
            self.next_pos.store(pos, Ordering::Relaxed);
        }
        let mut put = 0u64;
        let mut waited = false;
        loop {
            let tick = pos >> self.seq_bits;
            if tick > max_tick {
                if !self.time_exhausted.load(Ordering::Relaxed) {
                    tracing::warn!(tick, max_tick, "snowflake time bits exhausted; no more ids");
                }
                // Release: consumers that see the flag have seen every id put before it.
                self.time_exhausted.store(true, Ordering::Release);
                break;
            }
            if tick > now_tick.saturating_add(self.max_ahead_ticks) {
                now_tick = self.now_tick();
                if tick > now_tick.saturating_add(self.max_ahead_ticks) {
                    if let Some(next) = self.next_era(pos, now_tick) {
                        pos = next;
                        continue;
                    }
                    if !wait_for_clock || self.stopping.load(Ordering::Acquire) {
                        break;
                    }
                    if !waited {
                        tracing::debug!(
                            tick,
                            now_tick,
                            "snowflake filler at its lead bound; waiting"
                        );
                        waited = true;
                        self.notify_consumers();
                    }
                    let until = self.layout.tick_start_unix_ms(tick - self.max_ahead_ticks);
                    let ms = (until - self.clock.now_unix_ms()).clamp(1, CLOCK_WAIT_STEP_MS as i64);
                    self.clock.sleep_ms(ms as u64);
                    continue;
                }
            }
            // Relaxed: this thread is its only writer.
            let worker_field = self.worker_field.load(Ordering::Relaxed);
            let id = match self.layout.compose(tick, worker_field, pos & self.seq_mask) {
                Ok(id) => id,
                Err(e) => {
                    tracing::error!(error = %e, tick, "snowflake compose failed; filler stops");
                    self.time_exhausted.store(true, Ordering::Release);
                    break;
                }
            };
            if self.ring.try_put(id).is_err() {
                break;
            }
            pos += 1;
            // Relaxed: read only for stats; ids travel through the ring's own synchronization.
            self.next_pos.store(pos, Ordering::Relaxed);
            put += 1;
            if put.is_multiple_of(NOTIFY_EVERY) {
                self.notify_consumers();
            }
        }
        self.notify_consumers();
        if put > 0 {
            tracing::debug!(
                put,
                last_tick = (pos - 1) >> self.seq_bits,
                "snowflake ring refilled"
            );
        }
        put
    }

    /// The clock's tick; 0 before the epoch (the lead bound then holds the filler back).
    /// Notes the reading as the latest seen when it is later than every one before.
    pub(super) fn now_tick(&self) -> u64 {
        let now_ms = self.clock.now_unix_ms();
        // Relaxed: read and written by the filler only (`new` stored the first reading).
        self.max_seen_ms.fetch_max(now_ms, Ordering::Relaxed);
        self.layout.delta_at(now_ms).unwrap_or(0)
    }

    /// Called with the filler held at its lead bound at `pos`: when the clock is more than
    /// `max_backward_ms` below the latest reading seen and an era is left, enters the next era
    /// at the clock's tick `now_tick` and returns its first position. The high-water mark of the
    /// era left is raised first, then `next_pos` is stored with Release (see `high_water`).
    pub(super) fn next_era(&self, pos: u64, now_tick: u64) -> Option<u64> {
        // Relaxed: filler-only data (see the fields).
        let era = self.era.load(Ordering::Relaxed);
        if era >= self.max_era {
            return None;
        }
        let now_ms = self.clock.now_unix_ms();
        let seen = self.max_seen_ms.load(Ordering::Relaxed);
        let by_ms = seen.saturating_sub(now_ms);
        if by_ms <= self.max_backward_ms as i64 {
            return None;
        }
        let first = now_tick << self.seq_bits;
        if first < self.floor_pos {
            return None;
        }
        let era_start = self.era_start_pos.load(Ordering::Relaxed);
        let field = self.layout.worker_field(era + 1, self.worker_id)?;
        if pos > era_start {
            let last_tick = (pos - 1) >> self.seq_bits;
            self.high_water.fetch_max(last_tick + 1, Ordering::Relaxed);
        }
        self.era.store(era + 1, Ordering::Relaxed);
        self.worker_field.store(field, Ordering::Relaxed);
        self.era_start_pos.store(first, Ordering::Relaxed);
        // The step is handled: later readings compare with the stepped-back clock.
        self.max_seen_ms.store(now_ms, Ordering::Relaxed);
        // Release: publishes the high-water mark raised above (see `stats`).
        self.next_pos.store(first, Ordering::Release);
        tracing::warn!(
            by_ms,
            clock_back = era + 1,
            max_clock_back = self.max_era,
            "clock moved backwards; filling under the next clock-back value"
        );
        Some(first)
    }

    pub(super) fn notify_consumers(&self) {
        let _g = lock(&self.ids_ready.0);
        self.ids_ready.1.notify_all();
    }
}
