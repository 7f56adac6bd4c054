//! Caller tokens, transport-free: create (the token shown once), list (never a secret),
//! revoke. The HTTP routes (`crate::http::tokens`) and the CLI (`leafid tokens`) both call
//! these. Tokens live in the server's own database only (with lanes, each region's database
//! holds its own: create a token in each), and a write here reloads this server's set at once
//! ([`Callers::reload`]); the other servers read it within `callers.refresh_secs`.

use chrono::{DateTime, TimeZone, Utc};

use crate::access::callers::{self, Callers, Scopes};
use crate::error::Error;
use crate::segment::StoreError;
use crate::store::tokens::{CallerTokenRow, CallerTokenStore, Revoked};

/// Largest `rate_per_sec` and `burst` accepted (a billion ids a second is beyond any server).
pub const MAX_RATE: i64 = 1_000_000_000;

/// What an admin asks for.
#[derive(Debug, Clone, Default)]
pub struct NewToken {
    /// The name: `[A-Za-z0-9._-]{1,64}`, never reused.
    pub name: String,
    /// The scope entries.
    pub tags: Vec<String>,
    /// Ids per second.
    pub rate_per_sec: Option<i64>,
    /// Burst of the rate.
    pub burst: Option<i64>,
    /// Share of a formatted tag's period, `0 < share <= 1` (stored in parts per million).
    pub period_share: Option<f64>,
}

/// A token as listed: everything but the secret and its hash.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenView {
    /// The name.
    pub name: String,
    /// The scope entries.
    pub tags: Vec<String>,
    /// Ids per second, if set.
    pub rate_per_sec: Option<i64>,
    /// Burst, if set.
    pub burst: Option<i64>,
    /// Share of a period, if set.
    pub period_share: Option<f64>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl From<&CallerTokenRow> for TokenView {
    fn from(r: &CallerTokenRow) -> Self {
        let at = |ms: i64| Utc.timestamp_millis_opt(ms).single().unwrap_or_default();
        Self {
            name: r.name.clone(),
            tags: Scopes::from_stored(&r.tags).entries(),
            rate_per_sec: r.rate_per_sec,
            burst: r.burst,
            period_share: r.period_share_ppm.map(|p| p as f64 / 1e6),
            created_at: at(r.created_at_ms),
            revoked_at: r.revoked_at_ms.map(at),
        }
    }
}

/// A token just created: the secret, shown this once, and its row.
#[derive(Debug, Clone)]
pub struct Created {
    /// The token (`lid_...`): stored nowhere; lost, it is revoked and another created.
    pub token: String,
    /// Its row as listed.
    pub view: TokenView,
}

fn invalid(message: String) -> Error {
    Error::InvalidRequest(message)
}

/// Checks `new` and returns the row to store (with the hash of a fresh token) and the token.
fn row_for(new: &NewToken, now_ms: i64) -> Result<(CallerTokenRow, String), Error> {
    callers::check_name(&new.name).map_err(invalid)?;
    let scopes = Scopes::parse(&new.tags).map_err(invalid)?;
    for (key, v) in [("rate_per_sec", new.rate_per_sec), ("burst", new.burst)] {
        if let Some(v) = v
            && !(1..=MAX_RATE).contains(&v)
        {
            return Err(invalid(format!(
                "{key} must be an integer from 1 to {MAX_RATE} (got {v})"
            )));
        }
    }
    let period_share_ppm = match new.period_share {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s <= 1.0 => Some(((s * 1e6).round() as i64).max(1)),
        Some(s) => {
            return Err(invalid(format!(
                "period_share must be a number above 0 and at most 1 (got {s})"
            )));
        }
    };
    let token = callers::new_token();
    let row = CallerTokenRow {
        name: new.name.clone(),
        token_hash: callers::hex(&callers::hash_token(&token)),
        tags: scopes.to_stored(),
        rate_per_sec: new.rate_per_sec,
        burst: new.burst,
        period_share_ppm,
        created_at_ms: now_ms,
        revoked_at_ms: None,
    };
    Ok((row, token))
}

/// Reloads this server's set after its own write; a failure leaves it to the refresh.
async fn reload(store: &dyn CallerTokenStore, callers: Option<&Callers>) {
    if let Some(c) = callers
        && let Err(e) = c.reload(store).await
    {
        tracing::warn!(error = %e, "caller tokens written but not reloaded: the refresh will");
    }
}

/// Creates a token; `token_exists` when the name is taken or was revoked.
pub async fn create(
    store: &dyn CallerTokenStore,
    callers: Option<&Callers>,
    new: &NewToken,
) -> Result<Created, Error> {
    let (row, token) = row_for(new, Utc::now().timestamp_millis())?;
    match store.create_token(&row).await {
        Ok(()) => {}
        Err(StoreError::AlreadyExists) => {
            return Err(Error::TokenExists(format!(
                "a caller token named {:?} exists or was revoked: a name is never reused, pick \
                 another",
                new.name
            )));
        }
        Err(e) => return Err(e.into()),
    }
    tracing::info!(name = %row.name, tags = %row.tags, "caller token created");
    reload(store, callers).await;
    Ok(Created {
        token,
        view: TokenView::from(&row),
    })
}

/// Every token, revoked ones included, by name (bytewise).
pub async fn list(store: &dyn CallerTokenStore) -> Result<Vec<TokenView>, Error> {
    Ok(store
        .list_tokens()
        .await?
        .iter()
        .map(TokenView::from)
        .collect())
}

/// Revokes a token (a second revoke changes nothing and succeeds); `unknown_token` when there
/// is none of this name. Returns its row as listed.
pub async fn revoke(
    store: &dyn CallerTokenStore,
    callers: Option<&Callers>,
    name: &str,
) -> Result<TokenView, Error> {
    if callers::check_name(name).is_err() {
        return Err(Error::UnknownToken(
            crate::telemetry::ClientText(name).to_string(),
        ));
    }
    match store
        .revoke_token(name, Utc::now().timestamp_millis())
        .await?
    {
        Revoked::Unknown => return Err(Error::UnknownToken(name.to_owned())),
        Revoked::Now => tracing::info!(name, "caller token revoked"),
        Revoked::Already => {}
    }
    reload(store, callers).await;
    store
        .list_tokens()
        .await?
        .iter()
        .find(|r| r.name == name)
        .map(TokenView::from)
        .ok_or_else(|| Error::UnknownToken(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Presented;
    use crate::access::callers::CallerMode;
    use crate::store::tokens::MemoryTokens;

    fn new(name: &str, tags: &[&str]) -> NewToken {
        NewToken {
            name: name.into(),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            ..NewToken::default()
        }
    }

    #[tokio::test]
    async fn a_token_is_stored_as_its_hash_and_admits_at_once_until_revoked() {
        let store = MemoryTokens::default();
        let callers = Callers::new(CallerMode::Auto, false);
        callers.install(&[]);
        let mut asked = new("pay", &["pay*"]);
        asked.period_share = Some(0.01);
        let created = create(&store, Some(&callers), &asked).await.unwrap();
        let rows = store.list_tokens().await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_ne!(rows[0].token_hash, created.token);
        assert!(!rows[0].token_hash.contains(&created.token[4..]));
        assert_eq!(rows[0].period_share_ppm, Some(10_000));
        let who = Presented {
            bearer: Some(created.token.clone()),
            peer: None,
        };
        assert!(callers.admit(&who, Some("pay_x"), None).is_ok());
        // Taken for good, revoked included.
        let again = create(&store, Some(&callers), &asked).await.unwrap_err();
        assert_eq!(again.code(), "token_exists");
        let view = revoke(&store, Some(&callers), "pay").await.unwrap();
        assert!(view.revoked_at.is_some());
        assert_eq!(
            callers.admit(&who, Some("pay_x"), None).unwrap_err().code(),
            "unauthorized"
        );
        assert_eq!(
            create(&store, Some(&callers), &asked)
                .await
                .unwrap_err()
                .code(),
            "token_exists"
        );
        assert_eq!(
            revoke(&store, None, "nope").await.unwrap_err().code(),
            "unknown_token"
        );
        // A second revoke keeps the first time.
        let twice = revoke(&store, None, "pay").await.unwrap();
        assert_eq!(twice.revoked_at, view.revoked_at);
    }

    #[tokio::test]
    async fn bad_requests_are_refused_before_anything_is_stored() {
        let store = MemoryTokens::default();
        let mut cases = vec![new("a b", &["t"]), new("ok", &[]), new("ok", &["bad tag"])];
        let mut rate = new("ok", &["t"]);
        rate.rate_per_sec = Some(0);
        cases.push(rate);
        for share in [0.0, 1.5, f64::NAN, -0.1] {
            let mut s = new("ok", &["t"]);
            s.period_share = Some(share);
            cases.push(s);
        }
        for c in cases {
            let e = create(&store, None, &c).await.unwrap_err();
            assert_eq!(e.code(), "invalid_request", "{c:?}");
        }
        assert!(store.list_tokens().await.unwrap().is_empty());
    }
}
