//! The rules of the `leaf_alloc` values people write: a tag's step, the `max_id` it starts at
//! and its description. The admin routes, `leafid tags` and the configuration check all ask
//! here; each only words its own refusals.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use super::biz_tag::BizTag;

/// Smallest step a DBA may set.
pub const MIN_STEP: i64 = 1;
/// Largest step a DBA may set; also the bound of `segment.max_step`, the doubling cap.
pub const MAX_STEP: i64 = 1_000_000_000;
/// Smallest `max_id` a new tag may start at (ids are positive); the default start.
pub const MIN_MAX_ID: i64 = 1;
/// Largest `max_id` a new tag may start at: at `i64::MAX` it could never lease an id.
pub const MAX_MAX_ID: i64 = i64::MAX - 1;
/// Longest description, in characters (the column is `varchar(256)`).
pub const MAX_DESCRIPTION_CHARS: usize = 256;

/// Why a value breaks a tag rule; each variant carries the offending value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TagRuleError {
    /// A step outside [`MIN_STEP`]`..=`[`MAX_STEP`].
    #[error("step must be within {MIN_STEP}..={MAX_STEP} (got {0})")]
    StepOutOfRange(i64),
    /// Text that is not an integer where a step was expected (the text as given).
    #[error("step must be an integer within {MIN_STEP}..={MAX_STEP} (got {0:?})")]
    StepNotInteger(String),
    /// A starting `max_id` outside [`MIN_MAX_ID`]`..=`[`MAX_MAX_ID`].
    #[error("max_id must be within {MIN_MAX_ID}..={MAX_MAX_ID} (got {0})")]
    MaxIdOutOfRange(i64),
    /// Text that is not an integer where a `max_id` was expected (the text as given).
    #[error("max_id must be an integer within {MIN_MAX_ID}..={MAX_MAX_ID} (got {0:?})")]
    MaxIdNotInteger(String),
    /// A description longer than [`MAX_DESCRIPTION_CHARS`] (its length in characters).
    #[error("description must be at most {MAX_DESCRIPTION_CHARS} characters (got {0})")]
    DescriptionTooLong(usize),
    /// An update that changes neither the step nor the description.
    #[error("nothing to change: give step and/or description")]
    NothingToChange,
}

/// A DBA's step that passed the rules: within [`MIN_STEP`]`..=`[`MAX_STEP`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Step(i64);

impl Step {
    /// The step as a number.
    pub const fn get(self) -> i64 {
        self.0
    }
}

impl TryFrom<i64> for Step {
    type Error = TagRuleError;

    fn try_from(n: i64) -> Result<Self, TagRuleError> {
        if (MIN_STEP..=MAX_STEP).contains(&n) {
            Ok(Self(n))
        } else {
            Err(TagRuleError::StepOutOfRange(n))
        }
    }
}

/// Decimal text, surrounding whitespace ignored.
impl FromStr for Step {
    type Err = TagRuleError;

    fn from_str(text: &str) -> Result<Self, TagRuleError> {
        let n = text
            .trim()
            .parse::<i64>()
            .map_err(|_| TagRuleError::StepNotInteger(text.to_owned()))?;
        Self::try_from(n)
    }
}

impl From<Step> for i64 {
    fn from(step: Step) -> i64 {
        step.0
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Checks the `max_id` a new tag starts at: within [`MIN_MAX_ID`]`..=`[`MAX_MAX_ID`].
pub fn check_max_id(max_id: i64) -> Result<i64, TagRuleError> {
    if (MIN_MAX_ID..=MAX_MAX_ID).contains(&max_id) {
        Ok(max_id)
    } else {
        Err(TagRuleError::MaxIdOutOfRange(max_id))
    }
}

/// Parses and checks a starting `max_id` from decimal text, surrounding whitespace ignored.
pub fn parse_max_id(text: &str) -> Result<i64, TagRuleError> {
    let n = text
        .trim()
        .parse::<i64>()
        .map_err(|_| TagRuleError::MaxIdNotInteger(text.to_owned()))?;
    check_max_id(n)
}

/// Checks a description: at most [`MAX_DESCRIPTION_CHARS`] characters.
pub fn check_description(description: &str) -> Result<(), TagRuleError> {
    match description.chars().count() {
        n if n > MAX_DESCRIPTION_CHARS => Err(TagRuleError::DescriptionTooLong(n)),
        _ => Ok(()),
    }
}

/// A new `leaf_alloc` row for [`TagAdminStore::create_tag`](super::TagAdminStore::create_tag),
/// its values checked by [`NewTag::new`].
///
/// The fields are public for the store implementations to read; outside this crate a `NewTag`
/// can only be built by [`NewTag::new`] (`non_exhaustive`), so it always passed the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewTag {
    /// The business tag.
    pub biz_tag: String,
    /// Step: within [`MIN_STEP`]`..=`[`MAX_STEP`].
    pub step: i64,
    /// Starting `max_id`: within [`MIN_MAX_ID`]`..=`[`MAX_MAX_ID`].
    pub max_id: i64,
    /// Free text, at most [`MAX_DESCRIPTION_CHARS`] characters.
    pub description: Option<String>,
}

impl NewTag {
    /// A new row: `max_id` is where the tag starts ([`MIN_MAX_ID`] when `None`). Refuses a
    /// `max_id` out of range, then a description that is too long.
    pub fn new(
        biz_tag: BizTag,
        step: Step,
        max_id: Option<i64>,
        description: Option<String>,
    ) -> Result<Self, TagRuleError> {
        let max_id = check_max_id(max_id.unwrap_or(MIN_MAX_ID))?;
        if let Some(d) = &description {
            check_description(d)?;
        }
        Ok(Self {
            biz_tag: biz_tag.as_str().to_owned(),
            step: step.get(),
            max_id,
            description,
        })
    }
}

/// A checked change of a row: a new step and/or a new description, at least one of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagUpdate {
    step: Option<Step>,
    description: Option<String>,
}

impl TagUpdate {
    /// Refuses a description that is too long, then an update that changes nothing.
    pub fn new(step: Option<Step>, description: Option<String>) -> Result<Self, TagRuleError> {
        if let Some(d) = &description {
            check_description(d)?;
        }
        if step.is_none() && description.is_none() {
            return Err(TagRuleError::NothingToChange);
        }
        Ok(Self { step, description })
    }

    /// The new step, if any.
    pub fn step(&self) -> Option<Step> {
        self.step
    }

    /// The new description, if any.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
}

/// A change of the step alone.
impl From<Step> for TagUpdate {
    fn from(step: Step) -> Self {
        Self {
            step: Some(step),
            description: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag() -> BizTag {
        BizTag::parse("orders").unwrap()
    }

    fn step(n: i64) -> Step {
        Step::try_from(n).unwrap()
    }

    #[test]
    fn a_step_is_within_one_and_a_billion() {
        for bad in [i64::MIN, -1, 0, 1_000_000_001, i64::MAX] {
            assert_eq!(Step::try_from(bad), Err(TagRuleError::StepOutOfRange(bad)));
        }
        for ok in [1, 2, 999_999_999, 1_000_000_000] {
            assert_eq!(Step::try_from(ok).map(Step::get), Ok(ok));
        }
        assert_eq!(i64::from(step(MAX_STEP)), 1_000_000_000);
        assert_eq!(step(500).to_string(), "500");
    }

    #[test]
    fn a_step_parses_from_decimal_text() {
        assert_eq!(" 1000000000\n".parse::<Step>(), Ok(step(MAX_STEP)));
        assert_eq!("1".parse::<Step>(), Ok(step(1)));
        assert_eq!(
            "1000000001".parse::<Step>(),
            Err(TagRuleError::StepOutOfRange(1_000_000_001))
        );
        assert_eq!("0".parse::<Step>(), Err(TagRuleError::StepOutOfRange(0)));
        assert_eq!("-5".parse::<Step>(), Err(TagRuleError::StepOutOfRange(-5)));
        for junk in ["", "1e9", "1.0", "ten", "99999999999999999999"] {
            assert_eq!(
                junk.parse::<Step>(),
                Err(TagRuleError::StepNotInteger(junk.into())),
                "{junk:?}"
            );
        }
    }

    #[test]
    fn a_max_id_is_positive_and_below_i64_max() {
        for bad in [i64::MIN, -5, -1, 0, i64::MAX] {
            assert_eq!(check_max_id(bad), Err(TagRuleError::MaxIdOutOfRange(bad)));
        }
        for ok in [1, 2, i64::MAX - 1] {
            assert_eq!(check_max_id(ok), Ok(ok));
        }
        assert_eq!(parse_max_id(" 42 "), Ok(42));
        assert_eq!(parse_max_id("-1"), Err(TagRuleError::MaxIdOutOfRange(-1)));
        assert_eq!(
            parse_max_id("x"),
            Err(TagRuleError::MaxIdNotInteger("x".into()))
        );
    }

    #[test]
    fn a_description_holds_at_most_256_characters() {
        assert_eq!(check_description(""), Ok(()));
        assert_eq!(check_description(&"d".repeat(256)), Ok(()));
        // Characters, not bytes: 256 two-byte characters fit.
        assert_eq!(check_description(&"é".repeat(256)), Ok(()));
        assert_eq!(
            check_description(&"d".repeat(257)),
            Err(TagRuleError::DescriptionTooLong(257))
        );
    }

    #[test]
    fn a_new_tag_checks_max_id_then_description() {
        let new = NewTag::new(tag(), step(10), None, None).unwrap();
        assert_eq!(
            (new.biz_tag.as_str(), new.step, new.max_id, new.description),
            ("orders", 10, 1, None)
        );
        let new = NewTag::new(tag(), step(10), Some(i64::MAX - 1), Some("d".repeat(256)));
        assert_eq!(new.map(|n| n.max_id), Ok(i64::MAX - 1));
        for bad in [0, -7] {
            assert_eq!(
                NewTag::new(tag(), step(10), Some(bad), Some("d".repeat(257))),
                Err(TagRuleError::MaxIdOutOfRange(bad))
            );
        }
        assert_eq!(
            NewTag::new(tag(), step(10), Some(1), Some("d".repeat(257))),
            Err(TagRuleError::DescriptionTooLong(257))
        );
    }

    #[test]
    fn an_update_changes_something_and_keeps_the_description_short() {
        let u = TagUpdate::new(Some(step(5)), None).unwrap();
        assert_eq!((u.step(), u.description()), (Some(step(5)), None));
        assert_eq!(TagUpdate::from(step(5)), u);
        let u = TagUpdate::new(None, Some("d".repeat(256))).unwrap();
        assert_eq!(u.description().map(str::len), Some(256));
        assert_eq!(
            TagUpdate::new(None, None),
            Err(TagRuleError::NothingToChange)
        );
        assert_eq!(
            TagUpdate::new(None, Some("d".repeat(257))),
            Err(TagRuleError::DescriptionTooLong(257))
        );
    }

    #[test]
    fn refusals_name_the_rule_and_the_value() {
        assert_eq!(
            TagRuleError::StepOutOfRange(0).to_string(),
            "step must be within 1..=1000000000 (got 0)"
        );
        assert_eq!(
            TagRuleError::MaxIdOutOfRange(-1).to_string(),
            "max_id must be within 1..=9223372036854775806 (got -1)"
        );
        assert_eq!(
            TagRuleError::DescriptionTooLong(300).to_string(),
            "description must be at most 256 characters (got 300)"
        );
    }
}
