//! One spec per tag (issue 41): what a tag is, read from one place.
//!
//! A [`TagSpec`] holds a tag's shape ([`Shape`]: numbers, or text written by its
//! [`TagFormat`] with the zone and the permutation resolved, a [`TextShape`]), its period rows
//! ([`PeriodRow`], the only code that knows the row syntax `tag@period`), its permutation tweak
//! ([`TagSpec::tweak`], frozen) and its ordering mode ([`OrderMode`], the one place a later
//! strict mode is set). Specs are cached in one place, a [`SpecCache`] per engine.
//!
//! **Why here, in the segment engine, and not in `crate::shapes`:** a spec names `leaf_alloc`
//! rows and checks them against the row's width ([`MAX_BIZ_TAG_LEN`]), which is the segment
//! engine's storage; `crate::shapes` stays pure (text and numbers, no rows, no tags), and the
//! spec uses it from above.
//!
//! **Storage:** a spec is stored as its format's JSON, exactly as before this module
//! ([`TagSpec::stored_json`], [`TagSpec::from_stored`]): existing databases read unchanged. A
//! plain tag stores no spec: its spec is the default one (numbers, [`OrderMode::PerServer`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
use jiff::Timestamp;
use jiff::tz::TimeZone;
use tracing::{info, warn};

use super::biz_tag::{BizTag, MAX_BIZ_TAG_LEN};
use super::error::SegmentError;
use super::store::SpecStore;
use crate::shapes::keys::KeyRing;
use crate::shapes::period::zone;
use crate::shapes::permute::Permutation;
use crate::shapes::{Decoded, FormatError, Period, Reset, TagFormat};
pub use binding::{KeyBinding, KeyBindings, KeyVerdict};
pub use error::SpecError;

/// How a tag's ids are ordered across servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OrderMode {
    /// Increasing per server, trending upwards across servers (Leaf's guarantee): a plain or
    /// formatted tag.
    #[default]
    PerServer,
    /// Increasing across every server in real-time order: one owner serves the tag, the
    /// others forward to it (`super::strict`). A plain (numbers) tag only; stored as the spec
    /// [`STRICT_SPEC`].
    Strict,
}

impl OrderMode {
    /// The mode's name in the API (`"per_server"`, `"strict"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PerServer => "per_server",
            Self::Strict => "strict",
        }
    }
}

/// The stored spec of a strict tag (in `leafid_tag_format`, where a formatted tag's format is):
/// kept for good like a format, so the name never comes back as a plain tag, and refused (not
/// served as a plain tag) by a server that predates strict tags, which cannot read it as a
/// format.
pub const STRICT_SPEC: &str = r#"{"order":"strict"}"#;

/// The JSON of [`STRICT_SPEC`], parsed (any spacing or field order).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StrictSpec {
    order: StrictWord,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "snake_case")]
enum StrictWord {
    Strict,
}

/// Whether a stored spec's JSON is a strict tag's.
pub fn is_strict_spec(json: &str) -> bool {
    serde_json::from_str::<StrictSpec>(json).is_ok_and(|s| matches!(s.order, StrictWord::Strict))
}

/// The separator of a period row's name: outside the tag alphabet, so no tag a user can create
/// or ask for is a period row.
const ROW_SEP: char = '@';

/// The `leaf_alloc` row of one period of a formatted tag: `parent@key` (`parent@` for a
/// sequence that never restarts). The only code that knows this syntax: making a row's name,
/// telling whether a name is one, and its parent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PeriodRow(BizTag);

impl PeriodRow {
    /// The row of the period `key` of `parent`.
    pub fn new(parent: &BizTag, key: &str) -> Self {
        Self(BizTag::from_row_name(format!(
            "{}{ROW_SEP}{key}",
            parent.as_str()
        )))
    }

    /// Whether `name` names a period row (never a tag: the separator is outside the tag
    /// alphabet, so the admin routes never reach one).
    pub fn is_period_row(name: &str) -> bool {
        name.contains(ROW_SEP)
    }

    /// The parent tag of the period row `name`, or `None` when `name` is not a period row.
    pub fn parent_of(name: &str) -> Option<&str> {
        name.split_once(ROW_SEP).map(|(parent, _)| parent)
    }

    /// The longest parent tag whose period rows of `reset` fit `leaf_alloc.biz_tag`.
    pub fn max_parent_len(reset: Reset) -> usize {
        MAX_BIZ_TAG_LEN - ROW_SEP.len_utf8() - reset.key_len()
    }

    /// The row's name as a tag (the key of its buffer and its row).
    pub fn as_biz_tag(&self) -> &BizTag {
        &self.0
    }

    /// The row's name.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl fmt::Display for PeriodRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why [`TagSpec::decode`] read no id.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not an id of the format.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A permuted tag without its key here.
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// A plain tag: its ids are numbers.
    #[error("biz_tag \"{0}\" is not formatted: its ids are numbers")]
    NotFormatted(BizTag),
}

/// Whether two stored format JSONs are the same format: compared parsed, so a retried create
/// whose JSON is spelt differently (field order, spacing) is still the same. JSON that does not
/// parse is equal only to the same text.
pub fn same_format(stored: &str, asked: &str) -> bool {
    if stored == asked || (is_strict_spec(stored) && is_strict_spec(asked)) {
        return true;
    }
    let parse = |j: &str| TagSpec::stored_format(j).ok();
    matches!((parse(stored), parse(asked)), (Some(a), Some(b)) if a == b)
}

/// A tag's shape.
#[derive(Debug)]
pub enum Shape {
    /// Numbers: a plain tag (no stored spec).
    Plain,
    /// Text, written by a format (a formatted tag); boxed, as a plain shape holds nothing.
    Text(Box<TextShape>),
}

/// The shape of a formatted tag: its format with the zone and the permutation resolved once,
/// and the period it last served.
#[derive(Debug)]
pub struct TextShape {
    /// The format, as stored.
    format: TagFormat,
    /// Its time zone.
    tz: TimeZone,
    /// A permuted format's permutation, or why this server has none (its key is not in
    /// `[shapes.keys]`); `None` for an unpermuted format.
    permutation: Option<Result<Permutation, SpecError>>,
    /// A permuted format's key binding on the engine's database (one per key id per engine,
    /// [`binding::KeyBindings`]); `None` when unpermuted or without the key.
    binding: Option<Arc<KeyBinding>>,
    /// The period last served, with what every request in it needs: made once per period
    /// instead of per request (the zone arithmetic, the row name, the head and the tweak are
    /// the same for every request until the period ends).
    current: ArcSwapOption<CurrentPeriod>,
}

impl TextShape {
    /// The format.
    pub fn format(&self) -> &TagFormat {
        &self.format
    }

    /// The permutation, if the format is permuted and this server holds its key.
    pub(crate) fn permutation(&self) -> Option<&Permutation> {
        match &self.permutation {
            Some(Ok(p)) => Some(p),
            _ => None,
        }
    }
}

/// A period being served, with its row, its ids' head and its tweak.
#[derive(Debug)]
pub(crate) struct CurrentPeriod {
    /// The period.
    pub period: Period,
    /// Its row.
    pub row: PeriodRow,
    /// The prefix and date part every id of the period starts with.
    pub head: String,
    /// The permutation's tweak for the period ([`TagSpec::tweak`]).
    pub tweak: Arc<[u8]>,
}

/// One tag's spec: its shape, its period rows, its permutation tweak and its ordering mode.
#[derive(Debug)]
pub struct TagSpec {
    tag: BizTag,
    shape: Shape,
    ordering: OrderMode,
}

impl TagSpec {
    /// A stored spec (today: a format's JSON, as `leafid_tag_format` holds it), checked; a
    /// permuted one gets its key from `keys` (without it the spec is still made, and serves
    /// nothing: [`SegmentError::KeyUnavailable`]) and a key binding of its own, not verified
    /// yet (an engine's specs share the engine's, [`SpecCache`]).
    pub fn from_stored(tag: BizTag, json: &str, keys: &KeyRing) -> Result<Self, SpecError> {
        Self::from_stored_in(tag, json, keys, &KeyBindings::default())
    }

    /// [`Self::from_stored`] with the key binding from `bindings`.
    fn from_stored_in(
        tag: BizTag,
        json: &str,
        keys: &KeyRing,
        bindings: &KeyBindings,
    ) -> Result<Self, SpecError> {
        if is_strict_spec(json) {
            return Ok(Self {
                tag,
                shape: Shape::Plain,
                ordering: OrderMode::Strict,
            });
        }
        let format = Self::stored_format(json)?;
        format.validate()?;
        let tz = zone(&format.time_zone)?;
        let permutation = format.permute.as_ref().map(|p| {
            let key = keys.get(&p.key_id).ok_or_else(|| SpecError::KeyMissing {
                key_id: p.key_id.clone(),
            })?;
            Ok(Permutation::new(key, format.radix, format.width)?)
        });
        let binding = format.permute.as_ref().and_then(|p| {
            keys.check_value(&p.key_id)
                .map(|check| bindings.of(&p.key_id, check))
        });
        Ok(Self {
            tag,
            shape: Shape::Text(Box::new(TextShape {
                format,
                tz,
                permutation,
                binding,
                current: ArcSwapOption::empty(),
            })),
            ordering: OrderMode::PerServer,
        })
    }

    /// The format of a stored spec's JSON (unchecked).
    pub fn stored_format(json: &str) -> Result<TagFormat, SpecError> {
        serde_json::from_str(json).map_err(|e| SpecError::Json { why: e.to_string() })
    }

    /// The JSON a formatted tag's spec is stored as: its format, exactly as before the spec
    /// existed (no field added, so existing databases read unchanged).
    pub fn stored_json(format: &TagFormat) -> Result<String, SpecError> {
        serde_json::to_string(format).map_err(|e| SpecError::Json { why: e.to_string() })
    }

    /// Checks a format for a new tag before anything is written: the format's own rules
    /// ([`TagFormat::validate`]), and room for its period rows within `leaf_alloc.biz_tag`
    /// ([`PeriodRow::max_parent_len`]). The one home of these rules for the admin API and the
    /// CLI.
    pub fn check_new(tag: &BizTag, format: &TagFormat) -> Result<(), SpecError> {
        format.validate()?;
        let max_tag_len = PeriodRow::max_parent_len(format.reset);
        if tag.as_str().len() > max_tag_len {
            return Err(SpecError::RowNameTooLong {
                reset: format.reset,
                max_tag_len,
            });
        }
        Ok(())
    }

    /// The tag.
    pub fn tag(&self) -> &BizTag {
        &self.tag
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The text shape of a formatted tag; `None` for a plain one.
    pub fn text(&self) -> Option<&TextShape> {
        match &self.shape {
            Shape::Text(t) => Some(t),
            Shape::Plain => None,
        }
    }

    /// The format of a formatted tag; `None` for a plain one.
    pub fn format(&self) -> Option<&TagFormat> {
        self.text().map(TextShape::format)
    }

    /// The text shape, or [`SpecError::NotFormatted`].
    fn text_or_err(&self) -> Result<&TextShape, SpecError> {
        self.text().ok_or_else(|| SpecError::NotFormatted {
            tag: self.tag.clone(),
        })
    }

    /// How the tag's ids are ordered across servers.
    pub fn ordering(&self) -> OrderMode {
        self.ordering
    }

    /// Whether the tag is strict ([`OrderMode::Strict`]): its ids are numbers from its owner.
    pub fn is_strict(&self) -> bool {
        self.ordering == OrderMode::Strict
    }

    /// Whether the ids come in issue order (all but a permuted tag's).
    pub fn ordered(&self) -> bool {
        self.format().is_none_or(|f| f.permute.is_none())
    }

    /// The row of the period `key` of this tag.
    pub fn period_row(&self, key: &str) -> PeriodRow {
        PeriodRow::new(&self.tag, key)
    }

    /// The FF1 tweak of the period `key` of this tag (`crate::shapes::permute`).
    ///
    /// **Frozen.** These bytes decide every permuted code ever issued: they are, and stay, the
    /// UTF-8 bytes of `tag@key` (e.g. `orders@20261127`; `tickets@` without a reset), which was
    /// the period's row name when the first permuted codes were issued (issue 35). They are
    /// spelt here by hand, not by [`PeriodRow`], so that renaming rows never changes a code.
    /// Tested against codes issued before this spec existed (`tests/data/permuted-vectors.json`).
    pub fn tweak(&self, key: &str) -> Vec<u8> {
        let tag = self.tag.as_str().as_bytes();
        let mut t = Vec::with_capacity(tag.len() + 1 + key.len());
        t.extend_from_slice(tag);
        t.push(b'@');
        t.extend_from_slice(key.as_bytes());
        t
    }

    /// The permutation, or [`SegmentError::KeyUnavailable`] (no key here) or
    /// [`SegmentError::KeyMismatch`] (the engine's database is known to record another key for
    /// the key id); `None` when unpermuted (or plain). Whether the database records this key
    /// is asked by [`Self::verified_permutation`], which serving and decoding go through.
    pub(crate) fn permutation(&self) -> Result<Option<&Permutation>, SegmentError> {
        let Some(text) = self.text() else {
            return Ok(None);
        };
        match &text.permutation {
            None => Ok(None),
            Some(Ok(p)) => match text.binding.as_deref().and_then(KeyBinding::known) {
                Some(KeyVerdict::Differs { recorded }) => Err(self.key_mismatch(text, recorded)),
                _ => Ok(Some(p)),
            },
            Some(Err(_)) => Err(SegmentError::KeyUnavailable {
                tag: self.tag.clone(),
                key_id: text
                    .format
                    .permute
                    .as_ref()
                    .map(|p| p.key_id.clone())
                    .unwrap_or_default(),
            }),
        }
    }

    /// [`Self::permutation`], once the engine's database (`store`) was found to record this
    /// server's key for the key id ([`KeyBinding::verify`]: recorded now if no key is, within
    /// `timeout`). What every permuted id passes before it is handed out or read back: a key
    /// the database does not record is [`SegmentError::KeyMismatch`], a database that does not
    /// answer is [`SegmentError::Store`] (`database_unavailable`), never a code.
    pub(crate) async fn verified_permutation<S: SpecStore + ?Sized>(
        &self,
        store: &S,
        timeout: std::time::Duration,
    ) -> Result<Option<&Permutation>, SegmentError> {
        let Some(p) = self.permutation()? else {
            return Ok(None);
        };
        // A permutation is made only with its key, and so with its binding: a spec without one
        // would be a bug, refused (fail closed) rather than served unchecked.
        let Some((text, binding)) = self.text().and_then(|t| Some((t, t.binding.as_deref()?)))
        else {
            return Err(SegmentError::KeyUnavailable {
                tag: self.tag.clone(),
                key_id: String::new(),
            });
        };
        match binding.verify(store, timeout).await {
            Ok(KeyVerdict::Matches) => Ok(Some(p)),
            Ok(KeyVerdict::Differs { recorded }) => Err(self.key_mismatch(text, recorded)),
            Err(e) => Err(SegmentError::Store(e)),
        }
    }

    /// [`SegmentError::KeyMismatch`] of this tag, its key's database recording `recorded`.
    fn key_mismatch(&self, text: &TextShape, recorded: &str) -> SegmentError {
        let binding = text.binding.as_deref();
        SegmentError::KeyMismatch {
            tag: self.tag.clone(),
            why: SpecError::KeyMismatch {
                key_id: binding.map(|b| b.key_id().to_owned()).unwrap_or_default(),
                check: binding.map(|b| b.check().to_owned()).unwrap_or_default(),
                recorded: recorded.to_owned(),
            },
        }
    }

    /// The period holding `at`.
    pub fn period_at(&self, at: Timestamp) -> Result<Period, SpecError> {
        let text = self.text_or_err()?;
        Ok(text.format.reset.period_at(at, &text.tz)?)
    }

    /// The period holding `now`, with its row, head and tweak: the one cached when `now` lies
    /// in it (a clock stepped back before its start, or past its end, makes the right one).
    pub(crate) fn current(&self, now: Timestamp) -> Result<Arc<CurrentPeriod>, SpecError> {
        let text = self.text_or_err()?;
        if let Some(c) = text.current.load_full()
            && c.period.start <= now
            && now < c.period.end
        {
            return Ok(c);
        }
        let period = self.period_at(now)?;
        let c = Arc::new(CurrentPeriod {
            row: self.period_row(&period.key),
            head: text.format.head(&period)?,
            tweak: self.tweak(&period.key).into(),
            period,
        });
        text.current.store(Some(c.clone()));
        Ok(c)
    }

    /// Reads an id of this tag back: its period and sequence, a permuted one through the key.
    /// Text that is not an id of the tag is [`FormatError::Malformed`], never another id.
    pub fn decode(&self, text: &str) -> Result<Decoded, DecodeError> {
        let Some(shape) = self.text() else {
            return Err(DecodeError::NotFormatted(self.tag.clone()));
        };
        let mut d = shape.format.decode(text)?;
        if let Some(p) = self.permutation()? {
            let seq = p
                .decrypt(&self.tweak(&d.period), d.sequence)
                .map_err(|e| FormatError::Malformed(e.to_string()))?;
            if seq == 0 || seq > shape.format.max_sequence() {
                return Err(FormatError::Malformed("not an id of this tag".into()).into());
            }
            d.sequence = seq;
        }
        Ok(d)
    }
}

/// The specs of the tags an engine knows, by tag: the one cache of specs (a formatted tag's
/// own row never serves numbers while its spec is here). Replaced copy-on-write: readers never
/// lock.
#[derive(Debug, Default)]
pub struct SpecCache {
    specs: ArcSwap<HashMap<String, Arc<TagSpec>>>,
    /// The engine's key bindings: one per key id, shared by its specs.
    bindings: KeyBindings,
}

impl SpecCache {
    /// The spec of `tag`, if known.
    pub fn get(&self, tag: &str) -> Option<Arc<TagSpec>> {
        self.specs.load().get(tag).cloned()
    }

    /// Every spec known, by tag.
    pub fn all(&self) -> Arc<HashMap<String, Arc<TagSpec>>> {
        self.specs.load_full()
    }

    /// Keeps the spec of `tag` from its stored JSON, unless one is known already (which is
    /// kept: it holds the period being served); the spec kept, or why the stored one is
    /// unusable.
    pub fn remember(
        &self,
        tag: &str,
        json: &str,
        keys: &KeyRing,
    ) -> Result<Arc<TagSpec>, SpecError> {
        if let Some(s) = self.get(tag) {
            return Ok(s);
        }
        let spec = Arc::new(TagSpec::from_stored_in(
            BizTag::parse(tag)?,
            json,
            keys,
            &self.bindings,
        )?);
        self.keep(vec![spec]);
        // The one kept: this one, or one another caller kept meanwhile.
        Ok(self.get(tag).expect("kept above"))
    }

    /// Keeps every stored spec of `found` (tag, JSON) not known yet (a refresh); an unusable
    /// one is logged and skipped (and its tag is still never served as numbers: the refresh
    /// skips its own row because the stored spec exists).
    pub fn remember_all(&self, found: impl IntoIterator<Item = (String, String)>, keys: &KeyRing) {
        let known = self.specs.load();
        let mut new = Vec::new();
        for (tag, json) in found {
            if known.contains_key(&tag) {
                continue;
            }
            match BizTag::parse(&tag)
                .map_err(SpecError::from)
                .and_then(|t| TagSpec::from_stored_in(t, &json, keys, &self.bindings))
            {
                Ok(spec) => new.push(Arc::new(spec)),
                Err(why) => warn!(biz_tag = %tag, %why, "stored format unusable"),
            }
        }
        if !new.is_empty() {
            self.keep(new);
        }
    }

    /// Forgets the spec of `tag` (its tag was deleted: a deleted formatted tag serves nothing,
    /// and its stored format is read again, with its row, if the name is created again);
    /// whether one was known.
    pub fn forget(&self, tag: &str) -> bool {
        if !self.specs.load().contains_key(tag) {
            return false;
        }
        let mut forgot = false;
        self.specs.rcu(|current| {
            let mut next = HashMap::clone(current);
            forgot = next.remove(tag).is_some();
            next
        });
        if forgot {
            info!(biz_tag = %tag, "formatted tag forgotten (deleted)");
        }
        forgot
    }

    /// Forgets every spec of `stale` that is still the very spec known for its tag (compared
    /// by pointer: a spec remembered again meanwhile, by a request that found the tag's row,
    /// is kept); the tags forgotten.
    pub fn forget_stale(&self, stale: &[Arc<TagSpec>]) -> Vec<String> {
        if stale.is_empty() {
            return Vec::new();
        }
        let mut forgot = Vec::new();
        self.specs.rcu(|current| {
            forgot.clear();
            let mut next = HashMap::clone(current);
            for s in stale {
                let tag = s.tag.as_str();
                if next.get(tag).is_some_and(|known| Arc::ptr_eq(known, s)) {
                    next.remove(tag);
                    forgot.push(tag.to_owned());
                }
            }
            next
        });
        for tag in &forgot {
            info!(biz_tag = %tag, "formatted tag forgotten: its row is gone");
        }
        forgot
    }

    /// The engine's binding of `key_id`, whose key here has the check value `check`.
    pub fn binding(&self, key_id: &str, check: &str) -> Arc<KeyBinding> {
        self.bindings.of(key_id, check)
    }

    /// Adds the specs whose tag is not known yet, in one copy of the map.
    fn keep(&self, specs: Vec<Arc<TagSpec>>) {
        self.specs.rcu(|current| {
            let mut next = HashMap::clone(current);
            for s in &specs {
                next.entry(s.tag.as_str().to_owned()).or_insert_with(|| {
                    info!(biz_tag = %s.tag, "formatted tag");
                    s.clone()
                });
            }
            next
        });
    }
}

pub mod binding;
pub(crate) mod error;
mod limits;
#[cfg(test)]
mod tests;
