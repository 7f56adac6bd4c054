//! `leafid tags {list, show, create, decode, set-step}` (and `leafid ids decode`): `leaf_alloc` rows for DBAs, straight on the
//! configured database (`database.url` from the defaults, `--config`, `LEAFID__DATABASE__URL`),
//! through the same id service ([`IdService`]), engine and store the server uses, lanes
//! included. No server needs to run.
//!
//! Input is checked against the engine's rules ([`leafid::segment::tag_rules`]) before the
//! database is touched, so a bad tag or step is exit 2 even when the database is down. A new
//! step applies at each server's next segment load (the server re-reads the row at every
//! lease). Connecting applies leafid's migrations, as the server does (`CREATE TABLE IF NOT
//! EXISTS`: an existing Leaf table is kept as it is).

use std::io::Write;

use clap::{Args, Subcommand};
use leafid::access::Operator;
use leafid::error::{Error, ErrorClass};
use leafid::http::tags::TagRowBody;
use leafid::segment::tag_rules::{
    self, MAX_DESCRIPTION_CHARS, MAX_MAX_ID, MAX_STEP, MIN_MAX_ID, MIN_STEP,
};
use leafid::segment::{BizTag, NewTag, Step, TagRow, TagSpec};
use leafid::service::IdService;
use leafid::shapes::TagFormat;

use super::CliError;

/// `leafid tags ...`.
#[derive(Debug, Subcommand)]
pub enum TagsCommand {
    /// List every row of leaf_alloc.
    List(OutputFlags),
    /// Show one row.
    Show {
        /// The business tag.
        biz_tag: String,
        #[command(flatten)]
        output: OutputFlags,
    },
    /// Create a row (the tag serves at once, also on running servers).
    Create {
        /// The new business tag: 1 to 128 bytes of [A-Za-z0-9._:-] and _.
        biz_tag: String,
        /// Its step, 1..=1000000000.
        #[arg(long, allow_hyphen_values = true)]
        step: String,
        /// The first id to lease (default 1). A deleted tag must start at or above the highest
        /// max_id it reached.
        #[arg(long, value_name = "ID", allow_hyphen_values = true)]
        max_id: Option<String>,
        /// Free text, at most 256 characters.
        #[arg(long)]
        description: Option<String>,
        /// A format (JSON, docs/shapes.md) makes the tag's ids text, e.g.
        /// '{"date":"yyyyMMdd","width":6,"reset":"daily","time_zone":"Asia/Shanghai"}'; --max-id
        /// is then where each period's sequence starts. Fixed for the name for good.
        #[arg(long, value_name = "JSON")]
        format: Option<String>,
        /// `--order strict`: ids increasing across every server in real-time order (one owner
        /// serves the tag, the others forward to it; docs/guarantees.md#strict-tags). Numbers
        /// only (no --format); kept for the name for good. Default: per_server.
        #[arg(long, value_name = "ORDER", value_parser = ["per_server", "strict"])]
        order: Option<String>,
        #[command(flatten)]
        output: OutputFlags,
    },
    /// Read a formatted tag's id back into its period and sequence.
    Decode {
        /// The formatted business tag.
        biz_tag: String,
        /// An id of it, as issued.
        id: String,
        #[command(flatten)]
        output: OutputFlags,
    },
    /// Change a row's step (applies at each server's next segment load).
    SetStep {
        /// The business tag.
        biz_tag: String,
        /// The new step, 1..=1000000000.
        #[arg(allow_hyphen_values = true)]
        step: String,
        #[command(flatten)]
        output: OutputFlags,
    },
}

/// Output format.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct OutputFlags {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A command with its input checked: what [`run`] executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// `tags list`.
    List,
    /// `tags show`.
    Show(BizTag),
    /// `tags create`, with a format for a formatted tag, or strict (`true`).
    Create(NewTag, Option<TagFormat>, bool),
    /// `tags decode` / `ids decode`.
    Decode(BizTag, String),
    /// `tags set-step`.
    SetStep(BizTag, Step),
}

impl TagsCommand {
    /// Whether the answer is JSON.
    pub fn json(&self) -> bool {
        match self {
            Self::List(o)
            | Self::Show { output: o, .. }
            | Self::Create { output: o, .. }
            | Self::Decode { output: o, .. }
            | Self::SetStep { output: o, .. } => o.json,
        }
    }

    /// Checks the input without touching the database (bad input: exit 2).
    pub fn check(&self) -> Result<Checked, CliError> {
        Ok(match self {
            Self::List(_) => Checked::List,
            Self::Show { biz_tag, .. } => Checked::Show(parse_tag(biz_tag)?),
            Self::Create {
                biz_tag,
                step,
                max_id,
                description,
                format,
                order,
                ..
            } => {
                let tag = parse_tag(biz_tag)?;
                let strict = order.as_deref() == Some("strict");
                if strict && format.is_some() {
                    return Err(CliError::BadInput(
                        "a strict tag's ids are numbers: --order strict takes no --format".into(),
                    ));
                }
                let format = format
                    .as_deref()
                    .map(|json| -> Result<TagFormat, CliError> {
                        let f: TagFormat = serde_json::from_str(json)
                            .map_err(|e| CliError::BadInput(format!("invalid --format: {e}")))?;
                        TagSpec::check_new(&tag, &f)
                            .map_err(|e| CliError::BadInput(format!("invalid --format: {e}")))?;
                        Ok(f)
                    })
                    .transpose()?;
                let max_id = max_id.as_deref().map(parse_max_id).transpose()?;
                if let Some(d) = description {
                    tag_rules::check_description(d).map_err(|_| {
                        CliError::BadInput(format!(
                            "invalid description: at most {MAX_DESCRIPTION_CHARS} characters"
                        ))
                    })?;
                }
                let step = parse_step(step)?;
                // Every value passed above: a refusal here would be a rule the checks missed.
                let new = NewTag::new(tag, step, max_id, description.clone())
                    .map_err(|e| CliError::BadInput(format!("invalid tag: {e}")))?;
                Checked::Create(new, format, strict)
            }
            Self::Decode { biz_tag, id, .. } => Checked::Decode(parse_tag(biz_tag)?, id.clone()),
            Self::SetStep { biz_tag, step, .. } => {
                Checked::SetStep(parse_tag(biz_tag)?, parse_step(step)?)
            }
        })
    }
}

fn parse_tag(text: &str) -> Result<BizTag, CliError> {
    BizTag::parse(text).map_err(|e| CliError::BadInput(format!("invalid biz_tag: {e}")))
}

fn parse_step(text: &str) -> Result<Step, CliError> {
    text.parse::<Step>().map_err(|_| {
        CliError::BadInput(format!(
            "invalid step {text:?}: an integer within {MIN_STEP}..={MAX_STEP}"
        ))
    })
}

fn parse_max_id(text: &str) -> Result<i64, CliError> {
    tag_rules::parse_max_id(text).map_err(|_| {
        CliError::BadInput(format!(
            "invalid max_id {text:?}: an integer within {MIN_MAX_ID}..={MAX_MAX_ID}"
        ))
    })
}

/// Runs a checked command through the id service (the one the server runs, with its lanes),
/// writing the answer to `out`; the lanes a write has not reached yet are returned, for a line
/// on stderr.
pub async fn run(
    command: &Checked,
    json: bool,
    ids: &IdService,
    out: &mut impl Write,
) -> Result<Vec<u8>, CliError> {
    let mut unreached = Vec::new();
    match command {
        Checked::List => {
            let rows = ids.list_tags().await.map_err(cli_error)?;
            if json {
                let rows: Vec<TagRowBody> = rows.into_iter().map(TagRowBody::from).collect();
                writeln!(out, "{}", to_json(&rows))?;
            } else {
                write_table(out, &rows)?;
            }
        }
        Checked::Show(tag) => match ids.get_tag(tag).await.map_err(cli_error)? {
            Some(row) => {
                let format = stored_format(ids, tag).await?;
                write_shown(out, &row, format.as_ref(), json)?;
            }
            None => return Err(CliError::UnknownTag(tag.to_string())),
        },
        Checked::Create(new, format, strict) => {
            let done = match strict {
                true => ids.create_strict_tag(new).await,
                false => ids.create_tag(new, format.as_ref()).await,
            }
            .map_err(|e| match e {
                // Another format under the name: the input, not the database (exit 2).
                Error::BizTagExists(why) if format.is_some() && why != new.biz_tag => {
                    CliError::BadInput(format!("biz_tag {why} exists already"))
                }
                e => cli_error(e),
            })?;
            write_row(out, &done.value, json)?;
            unreached = done.unreached;
        }
        Checked::Decode(tag, id) => {
            // The operator's decode: a permuted tag with its key from this configuration.
            let d = ids.decode(&Operator, tag, id).await.map_err(|e| match e {
                Error::InvalidId(why) => CliError::BadInput(format!("invalid id {id:?}: {why}")),
                // This command's configuration lacks the key: the operator's input to fix.
                Error::KeyUnavailable(why) => CliError::BadInput(why),
                e => cli_error(e),
            })?;
            if json {
                let body = serde_json::json!({
                    "biz_tag": tag.as_str(), "id": id, "period": d.period, "sequence": d.sequence,
                });
                writeln!(out, "{body}")?;
            } else {
                writeln!(
                    out,
                    "biz_tag  {tag}\nid       {id}\nperiod   {}\nsequence {}",
                    d.period, d.sequence
                )?;
            }
        }
        Checked::SetStep(tag, step) => {
            let done = ids
                .update_tag(tag, &(*step).into())
                .await
                .map_err(cli_error)?;
            write_row(out, &done.value, json)?;
            if !json {
                writeln!(out, "(applies at each server's next segment load)")?;
            }
            unreached = done.unreached;
        }
    }
    Ok(unreached)
}

/// The service's refusal as the CLI's: its own lines for the refusals a DBA acts on, exit 2
/// for what the input got wrong, exit 1 with the message for the rest.
fn cli_error(e: Error) -> CliError {
    match e {
        Error::UnknownBizTag(tag) => CliError::UnknownTag(tag),
        Error::BizTagExists(tag) => CliError::TagExists(tag),
        Error::MaxIdBelowDeleted {
            biz_tag,
            high_water,
        } => CliError::MaxIdBelowDeleted {
            biz_tag,
            high_water,
        },
        e if e.class() == ErrorClass::Invalid => CliError::BadInput(e.to_string()),
        e => CliError::Database(e.to_string()),
    }
}

/// The API's shape of rows ([`TagRowBody`]), pretty-printed.
fn to_json<T: serde::Serialize>(value: &T) -> String {
    // A row holds strings, numbers and a timestamp: it always serializes.
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The format of `tag` as the database stores it (`None` for a plain tag): read, not taken
/// from a cache, as the CLI has none.
async fn stored_format(ids: &IdService, tag: &BizTag) -> Result<Option<TagFormat>, CliError> {
    let Some(segment) = ids.segment_engine() else {
        return Ok(None);
    };
    let spec = segment
        .spec_of(tag)
        .await
        .map_err(|e| cli_error(e.into()))?;
    Ok(spec.and_then(|s| s.format().cloned()))
}

/// `tags show`: the row, and a formatted tag's format (as `docs/shapes.md` writes it).
fn write_shown(
    out: &mut impl Write,
    row: &TagRow,
    format: Option<&TagFormat>,
    json: bool,
) -> std::io::Result<()> {
    let Some(format) = format else {
        return write_row(out, row, json);
    };
    if json {
        let mut body = serde_json::to_value(TagRowBody::from(row.clone())).unwrap_or_default();
        body["format"] = serde_json::to_value(format).unwrap_or_default();
        return writeln!(out, "{}", to_json(&body));
    }
    write_row(out, row, false)?;
    writeln!(
        out,
        "format       {}",
        serde_json::to_string(format).unwrap_or_default()
    )
}

fn write_row(out: &mut impl Write, row: &TagRow, json: bool) -> std::io::Result<()> {
    if json {
        return writeln!(out, "{}", to_json(&TagRowBody::from(row.clone())));
    }
    writeln!(out, "biz_tag      {}", row.biz_tag)?;
    writeln!(out, "max_id       {}", row.max_id)?;
    writeln!(out, "step         {}", row.step)?;
    writeln!(
        out,
        "description  {}",
        row.description.as_deref().unwrap_or("")
    )?;
    writeln!(
        out,
        "update_time  {}",
        row.update_time.map(|t| t.to_rfc3339()).unwrap_or_default()
    )
}

fn write_table(out: &mut impl Write, rows: &[TagRow]) -> std::io::Result<()> {
    let width = rows
        .iter()
        .map(|r| r.biz_tag.len())
        .max()
        .unwrap_or(0)
        .max("biz_tag".len());
    writeln!(
        out,
        "{:<width$}  {:>20}  {:>10}  description",
        "biz_tag", "max_id", "step"
    )?;
    for r in rows {
        writeln!(
            out,
            "{:<width$}  {:>20}  {:>10}  {}",
            r.biz_tag,
            r.max_id,
            r.step,
            r.description.as_deref().unwrap_or("")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use leafid::access::AccessPolicy;
    use leafid::segment::{SegmentAllocator, TagAdminStore};
    use leafid::service::SegmentRoute;
    use leafid::testing::MemoryStore;

    /// The CLI's service over an in-memory store (no lanes).
    fn engine(store: MemoryStore) -> (Arc<MemoryStore>, IdService) {
        let store = Arc::new(store);
        let engine = SegmentAllocator::new(store.clone(), Default::default());
        let ids = IdService::new(
            Some(SegmentRoute::single(engine)),
            None,
            AccessPolicy::default(),
        );
        (store, ids)
    }

    fn cmd(args: &[&str]) -> TagsCommand {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            c: TagsCommand,
        }
        Cli::try_parse_from(std::iter::once("tags").chain(args.iter().copied()))
            .unwrap()
            .c
    }

    #[test]
    fn bad_input_is_caught_before_the_database() {
        for args in [
            &["show", "a b"][..],
            &["create", "t", "--step", "0"],
            &["create", "t", "--step", "1000000001"],
            &["create", "t", "--step", "1e9"],
            &["create", "t", "--step", "10", "--max-id", "0"],
            &["set-step", "t", "-5"],
            &["set-step", "", "5"],
        ] {
            let err = cmd(args).check().unwrap_err();
            assert_eq!(err.code(), 2, "{args:?}: {err}");
        }
    }

    #[test]
    fn refusals_keep_their_words_and_order() {
        let refused = |args: &[&str]| cmd(args).check().unwrap_err().to_string();
        assert_eq!(
            refused(&["create", "t", "--step", " 0"]),
            r#"invalid step " 0": an integer within 1..=1000000000"#
        );
        assert_eq!(
            refused(&["set-step", "t", "1e9"]),
            r#"invalid step "1e9": an integer within 1..=1000000000"#
        );
        // max_id and the description are checked before the step.
        assert_eq!(
            refused(&[
                "create",
                "t",
                "--step",
                "0",
                "--max-id",
                "9223372036854775807"
            ]),
            r#"invalid max_id "9223372036854775807": an integer within 1..=9223372036854775806"#
        );
        let long = "d".repeat(257);
        assert_eq!(
            refused(&["create", "t", "--step", "0", "--description", &long]),
            "invalid description: at most 256 characters"
        );
        let fits = "d".repeat(256);
        let ok = cmd(&[
            "create",
            "t",
            "--step",
            "1000000000",
            "--description",
            &fits,
        ]);
        assert!(
            matches!(ok.check(), Ok(Checked::Create(n, None, false)) if n.step == 1_000_000_000)
        );
        let strict = cmd(&["create", "m", "--step", "10", "--order", "strict"]);
        assert!(matches!(strict.check(), Ok(Checked::Create(_, None, true))));
        assert_eq!(
            refused(&[
                "create",
                "m",
                "--step",
                "10",
                "--order",
                "strict",
                "--format",
                r#"{"width":6}"#
            ]),
            "a strict tag's ids are numbers: --order strict takes no --format"
        );
    }

    #[tokio::test]
    async fn create_then_set_step_then_show() {
        let (_, engine) = engine(MemoryStore::default());
        let mut out = Vec::new();
        let create = cmd(&["create", "orders", "--step", "500"]).check().unwrap();
        run(&create, false, &engine, &mut out).await.unwrap();
        let again = run(&create, false, &engine, &mut out).await.unwrap_err();
        assert!(matches!(again, CliError::TagExists(_)), "{again}");
        let set = cmd(&["set-step", "orders", "900"]).check().unwrap();
        run(&set, false, &engine, &mut out).await.unwrap();
        let mut shown = Vec::new();
        let show = cmd(&["show", "orders"]).check().unwrap();
        run(&show, true, &engine, &mut shown).await.unwrap();
        let row: serde_json::Value = serde_json::from_slice(&shown).unwrap();
        assert_eq!(row["step"], 900);
        let unknown = cmd(&["set-step", "nope", "5"]).check().unwrap();
        let err = run(&unknown, false, &engine, &mut out).await.unwrap_err();
        assert_eq!(err.code(), 1);
    }

    /// `tags show` of a formatted tag shows its format (read from the database: the CLI has no
    /// cache), in text and JSON; a plain tag's shows none.
    #[tokio::test]
    async fn show_prints_a_formatted_tags_format() {
        let (store, engine) = engine(MemoryStore::with_rows(&[("inv", 1, 100), ("plain", 1, 10)]));
        let json =
            r#"{"prefix":"INV-","date":"yyyyMM","width":5,"reset":"monthly","time_zone":"UTC"}"#;
        assert!(
            leafid::segment::SpecStore::put_format(&*store, "inv", json)
                .await
                .unwrap()
        );
        let show = cmd(&["show", "inv"]).check().unwrap();
        let mut text = Vec::new();
        run(&show, false, &engine, &mut text).await.unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("format ") && text.contains(r#""prefix":"INV-""#),
            "{text}"
        );
        let mut shown = Vec::new();
        run(&show, true, &engine, &mut shown).await.unwrap();
        let row: serde_json::Value = serde_json::from_slice(&shown).unwrap();
        assert_eq!(row["format"]["prefix"], "INV-", "{row}");
        assert_eq!(row["format"]["reset"], "monthly", "{row}");
        let mut plain = Vec::new();
        let show = cmd(&["show", "plain"]).check().unwrap();
        run(&show, false, &engine, &mut plain).await.unwrap();
        assert!(!String::from_utf8(plain).unwrap().contains("format"));
    }

    #[tokio::test]
    async fn a_deleted_tag_is_refused_below_its_high_water_mark() {
        let (store, engine) = engine(MemoryStore::with_rows(&[("orders", 5000, 100)]));
        assert!(store.delete_tag("orders").await.unwrap());
        let mut out = Vec::new();
        let create = cmd(&["create", "orders", "--step", "500"]).check().unwrap();
        let err = run(&create, false, &engine, &mut out).await.unwrap_err();
        assert_eq!(err.code(), 1);
        let shown = err.to_string();
        assert!(
            shown.contains("--max-id 5000") && !shown.contains('\n'),
            "{shown}"
        );
        let resume = cmd(&["create", "orders", "--step", "500", "--max-id", "5000"])
            .check()
            .unwrap();
        run(&resume, false, &engine, &mut out).await.unwrap();
    }
}
