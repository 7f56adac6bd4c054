//! Tracing subscriber: `RUST_LOG` filter (default `info`), text or JSON lines on stderr written
//! off the request threads by [`sink`] (a full, closed or slow stderr drops lines, counted, and
//! never stops an id); and [`LogLimiter`], which keeps a failure repeated per request to one line
//! per cause per interval.

pub mod sink;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tracing_subscriber::EnvFilter;

/// How log lines are written (`log.format`, parsed by `crate::config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber once, writing `format` lines; later calls (tests) are no-ops.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        // The writer never reports an error, and the subscriber must never report one itself:
        // it would do so with `eprintln!`, which panics when stderr cannot be written.
        .log_internal_errors(false)
        .with_writer(sink::writer(std::io::stderr()));
    let _ = if format == LogFormat::Json {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init()
    } else {
        builder.try_init()
    };
}

/// A value a client chose (a snowflake key, a header), as it goes into a log line: control
/// characters escaped (`\n`, `\u{1b}`), so a `%0A` in a key cannot forge a second line in the
/// text log, and at most [`ClientText::MAX_CHARS`] characters, the rest cut with `...`. Every
/// client value that is logged goes through this.
#[derive(Debug, Clone, Copy)]
pub struct ClientText<'a>(pub &'a str);

impl ClientText<'_> {
    /// Characters kept; a longer value ends in `...`.
    pub const MAX_CHARS: usize = 128;
}

impl std::fmt::Display for ClientText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write;
        for (i, c) in self.0.chars().enumerate() {
            if i == Self::MAX_CHARS {
                return f.write_str("...");
            }
            // Control characters, the backslash (so an escape cannot be faked) and the bidi
            // overrides that make a terminal show text in another order.
            let bidi = matches!(c, '\u{200e}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
            if c.is_control() || c == '\\' || bidi {
                write!(f, "{}", c.escape_default())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// How often one cause of a repeated failure is logged; the rest are counted in metrics.
pub const REPEAT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Logs a failure that repeats per request (an outage's 503s) once per cause per interval.
///
/// [`LogLimiter::allow`] answers `Some(suppressed)` when the cause may be logged now, with how
/// many occurrences were held back since its last line, and `None` otherwise. A std Mutex: it
/// is taken only on failures, never on the id path, and never held across an await.
#[derive(Debug)]
pub struct LogLimiter {
    /// Shortest time between two lines of one cause.
    interval: Duration,
    /// Cause -> (when it was last logged, occurrences held back since).
    causes: Mutex<HashMap<&'static str, (Instant, u64)>>,
}

impl LogLimiter {
    /// A limiter allowing one line per cause per `interval`.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            causes: Mutex::new(HashMap::new()),
        }
    }

    /// The process-wide limiter, at [`REPEAT_LOG_INTERVAL`].
    pub fn global() -> &'static Self {
        static GLOBAL: OnceLock<LogLimiter> = OnceLock::new();
        GLOBAL.get_or_init(|| Self::new(REPEAT_LOG_INTERVAL))
    }

    /// Whether `cause` may be logged now (see the type docs).
    pub fn allow(&self, cause: &'static str) -> Option<u64> {
        self.allow_at(cause, Instant::now())
    }

    fn allow_at(&self, cause: &'static str, now: Instant) -> Option<u64> {
        let mut causes = self.causes.lock().unwrap_or_else(|e| e.into_inner());
        match causes.get_mut(cause) {
            Some((last, held)) if now.duration_since(*last) < self.interval => {
                *held += 1;
                None
            }
            Some((last, held)) => {
                *last = now;
                Some(std::mem::take(held))
            }
            None => {
                causes.insert(cause, (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_text_escapes_controls_and_is_bounded() {
        let forged = "k\n2026-11-27T00:00:00Z ERROR forged\r\u{1b}[31m\\n\u{202e}";
        let shown = ClientText(forged).to_string();
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert_eq!(
            shown,
            "k\\n2026-11-27T00:00:00Z ERROR forged\\r\\u{1b}[31m\\\\n\\u{202e}"
        );
        let long = "x".repeat(1000);
        assert_eq!(
            ClientText(&long).to_string().len(),
            ClientText::MAX_CHARS + 3
        );
    }

    #[test]
    fn a_cause_is_logged_once_per_interval_and_the_rest_are_counted() {
        let limiter = LogLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(limiter.allow_at("db", t0), Some(0));
        for ms in [1, 500, 9_999] {
            assert_eq!(limiter.allow_at("db", t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(
            limiter.allow_at("other", t0 + Duration::from_millis(2)),
            Some(0),
            "causes are limited separately"
        );
        assert_eq!(
            limiter.allow_at("db", t0 + Duration::from_secs(10)),
            Some(3)
        );
        assert_eq!(limiter.allow_at("db", t0 + Duration::from_secs(11)), None);
    }
}
