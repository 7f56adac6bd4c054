//! [`Statement`]: a statement the dialects share, written once with `?` placeholders.
//!
//! MySQL and SQLite take `?`; PostgreSQL takes `$1, $2, ...`. A statement the databases share
//! is written once, with `?`, as a [`Statement`]; [`Statement::text`] hands each dialect its
//! own text. PostgreSQL's is made from the `?` text the first time it is needed and kept for
//! the life of the process (a `OnceLock` per statement), so the translation runs once per
//! statement, not per query, and every query still gets a `&'static str` (which sqlx takes as
//! safe SQL, and caches a prepared statement under). Why not one text per dialect written by
//! hand: the shared statements would then exist three times, and a fix to one copy could miss
//! another; why not `$n` everywhere: MySQL has no numbered placeholders.

use std::sync::OnceLock;

use super::dialect::Dialect;

/// A statement shared by the dialects, written once with `?` placeholders (see the module
/// docs). Declare it as a `static`: its PostgreSQL text is kept inside it.
pub(crate) struct Statement {
    /// The text with `?` placeholders (MySQL, SQLite).
    text: &'static str,
    /// The text with `$1, $2, ...`, made on first use (PostgreSQL).
    numbered: OnceLock<String>,
}

impl Statement {
    /// A statement with `?` placeholders, none of them inside a quoted literal or identifier.
    pub(crate) const fn new(text: &'static str) -> Self {
        Self {
            text,
            numbered: OnceLock::new(),
        }
    }

    /// The text dialect `D` runs.
    pub(crate) fn text<D: Dialect>(&'static self) -> &'static str {
        if D::NUMBERED_PLACEHOLDERS {
            self.numbered.get_or_init(|| number_placeholders(self.text))
        } else {
            self.text
        }
    }
}

/// `?` placeholders as `$1, $2, ...` in order, leaving quoted text (`'...'`, `"..."`) as it is.
fn number_placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut n = 0;
    let mut quote = None;
    for c in text.chars() {
        match (quote, c) {
            (None, '?') => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
                continue;
            }
            (None, '\'' | '"') => quote = Some(c),
            // A doubled quote inside a literal closes and reopens it: same result.
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::number_placeholders;

    #[test]
    fn placeholders_are_numbered_in_order_outside_quoted_text() {
        assert_eq!(
            number_placeholders(
                "UPDATE t SET a = ?, b = '?', c = \"?\" WHERE d = ? AND e = 'it''s ?'"
            ),
            "UPDATE t SET a = $1, b = '?', c = \"?\" WHERE d = $2 AND e = 'it''s ?'"
        );
        assert_eq!(number_placeholders("SELECT 1"), "SELECT 1");
    }
}
