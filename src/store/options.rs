//! How to reach a database ([`DbOptions`]), and a URL as logs and errors may show it
//! ([`redact`]): no password ever leaves the process in text.

use std::time::Duration;

/// Connection settings shared by every database. Its `Debug` shows the URL with the password
/// redacted.
#[derive(Clone)]
pub struct DbOptions {
    /// `sqlite://...`, `mysql://...` (or `mariadb://`) or `postgres://...`.
    pub url: String,
    /// Pool size (SQLite always uses one connection: one writer avoids busy waits).
    pub max_connections: u32,
    /// How long to wait for a pooled connection.
    pub acquire_timeout: Duration,
    /// MySQL: lease adapted steps with one `LAST_INSERT_ID` statement.
    pub mysql_single_statement_lease: bool,
    /// PostgreSQL reached through PgBouncer in transaction pooling mode: no statement cache,
    /// each statement in a transaction of its own (see [`postgres`](super::postgres)).
    pub pgbouncer: bool,
}

impl std::fmt::Debug for DbOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbOptions")
            .field("url", &redact(&self.url))
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field(
                "mysql_single_statement_lease",
                &self.mysql_single_statement_lease,
            )
            .field("pgbouncer", &self.pgbouncer)
            .finish()
    }
}

/// The URL with any password replaced by `***`, for logs and errors; a URL without one is
/// returned as given. Text that does not parse as a URL but has credentials (`scheme://...@`)
/// loses them all rather than risk printing a password.
pub fn redact(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Only fails for URLs that cannot have credentials, which have no password either.
            let _ = parsed.set_password(Some("***"));
            parsed.into()
        }
        Ok(_) => text.to_owned(),
        Err(_) => match (text.find("://"), text.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}***{}", &text[..scheme + 3], &text[at..])
            }
            _ => text.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_database_password() {
        let opts = DbOptions {
            url: "mysql://root:hunter2@127.0.0.1:3306/leaf".into(),
            max_connections: 1,
            acquire_timeout: std::time::Duration::from_secs(1),
            mysql_single_statement_lease: true,
            pgbouncer: false,
        };
        let shown = format!("{opts:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("root:***@127.0.0.1"), "{shown}");
    }

    #[test]
    fn redact_hides_only_the_password() {
        assert_eq!(
            redact("mysql://root:pw@127.0.0.1:3306/leaf"),
            "mysql://root:***@127.0.0.1:3306/leaf"
        );
        assert_eq!(redact("sqlite://data/leafid.db"), "sqlite://data/leafid.db");
        assert_eq!(redact("sqlite::memory:"), "sqlite::memory:");
        assert_eq!(redact("sqlite:///tmp/a b.db"), "sqlite:///tmp/a b.db");
        assert_eq!(
            redact("mariadb://root@db:3306/leaf"),
            "mariadb://root@db:3306/leaf"
        );
        assert_eq!(
            redact("mysql://:pw@db/leaf?ssl-mode=REQUIRED"),
            "mysql://:***@db/leaf?ssl-mode=REQUIRED"
        );
        // An '@' inside the password: the last one ends the credentials.
        assert_eq!(
            redact("mysql://leaf:p@ss@db/leaf"),
            "mysql://leaf:***@db/leaf"
        );
        // Not a URL (a bad port) but with credentials: all of them go.
        assert_eq!(
            redact("mysql://leaf:pw@db:port/leaf"),
            "mysql://***@db:port/leaf"
        );
    }
}
