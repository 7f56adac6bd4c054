//! The flags of `leafid layout {decode, bounds, plan, check}`, as clap reads them: text stays text here
//! (see `parse`), so that a bad value gets one line naming it.

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use leafid::snowflake::layout;

/// `leafid layout ...`: decode ids, plan a migration to a new layout, check a layout.
#[derive(Debug, Subcommand)]
pub enum LayoutCommand {
    /// Show an id's fields (prefix, time delta, timestamp, worker id, sequence) under a layout.
    Decode(DecodeArgs),
    /// Show the smallest and largest id any worker can issue in a time range [FROM, TO), for
    /// `WHERE id BETWEEN`.
    Bounds(BoundsArgs),
    /// Plan a new layout whose ids stay positive and above every legacy id.
    Plan(PlanArgs),
    /// Check that a layout can never issue an id <= a floor from now on, and until when it lasts.
    Check(CheckArgs),
}

/// A named layout: clap's spelling and help of [`layout::Preset`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// 28/22/13, seconds, epoch 2016-05-20T00:00:00+08:00.
    UidGenerator,
    /// 41/10/12, milliseconds, epoch 1288834974657 (unix ms).
    Twitter,
    /// 10+31/8/14 with the prefix at 0, seconds, epoch 2025-01-01Z: every id <= 2^53 - 1.
    JsSafe,
}

impl From<Preset> for layout::Preset {
    fn from(preset: Preset) -> Self {
        match preset {
            Preset::UidGenerator => layout::Preset::UidGenerator,
            Preset::Twitter => layout::Preset::Twitter,
            Preset::JsSafe => layout::Preset::JsSafe,
        }
    }
}

/// A layout on the command line: `--layout` with `--epoch` (and `--unit`), or `--preset`.
#[derive(Clone, Debug, Default, Args)]
pub struct LayoutFlags {
    /// Bit widths, T/W/S or P+T/W/S (e.g. 28/22/13, 7+30/13/13).
    #[arg(
        long,
        value_name = "BITS",
        requires = "epoch",
        conflicts_with = "preset"
    )]
    pub layout: Option<String>,
    /// Epoch of the layout: RFC 3339 with an explicit offset, or unix milliseconds.
    #[arg(long, value_name = "RFC3339", requires = "layout")]
    pub epoch: Option<String>,
    /// Length of one tick: seconds (the default) or millis.
    #[arg(long, value_name = "UNIT", requires = "layout")]
    pub unit: Option<String>,
    /// Value of the prefix bits (default: all ones, the usual mask).
    #[arg(long, value_name = "N")]
    pub prefix_value: Option<String>,
    /// A named layout instead of --layout/--epoch/--unit.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
}

/// `leafid layout decode ID ...`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which_layout").required(true).args(["layout", "preset"])))]
pub struct DecodeArgs {
    /// The id, a decimal integer in 0..=9223372036854775807.
    #[arg(value_name = "ID", allow_hyphen_values = true)]
    pub id: String,
    /// The layout to read it with.
    #[command(flatten)]
    pub layout: LayoutFlags,
    /// Print `{"id", "prefix", "time_delta", "timestamp", "worker_id", "sequence"}` (and
    /// `"region"`, `"region_worker_id"` with --region-bits).
    #[arg(long)]
    pub json: bool,
    /// Regions (snowflake.worker.region_bits): the top R bits of the worker id are the region
    /// (lanes.slot); shows the region and the worker id within it.
    #[arg(long, value_name = "R")]
    pub region_bits: Option<u8>,
}

/// `leafid layout bounds --from TIME --to TIME ...`.
#[derive(Debug, Args)]
pub struct BoundsArgs {
    /// Start of the range, inclusive: RFC 3339 with an explicit offset, or unix milliseconds.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub from: String,
    /// End of the range, exclusive: RFC 3339 with an explicit offset, or unix milliseconds.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub to: String,
    /// The layout (from the configuration when left out: --config, LEAFID__*; clock-back bits
    /// do not change the bounds).
    #[command(flatten)]
    pub layout: LayoutFlags,
    /// Print `{"layout", "from", "to", "min_id", "max_id", "first_tick", "last_tick"}`.
    #[arg(long)]
    pub json: bool,
}

/// `leafid layout plan ...`: the flags of the HTTP route's body (DESIGN.md section 6).
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("legacy_layout").required(true).args(["legacy", "legacy_preset"])))]
#[command(group(ArgGroup::new("legacy_max").required(true).args(["max_legacy_id", "cutover"])))]
pub struct PlanArgs {
    /// The legacy layout's bit widths, T/W/S or P+T/W/S (e.g. 28/22/13).
    #[arg(long, value_name = "BITS", requires = "legacy_epoch")]
    pub legacy: Option<String>,
    /// The legacy layout's epoch: RFC 3339 with an explicit offset, or unix milliseconds.
    #[arg(long, value_name = "RFC3339", requires = "legacy")]
    pub legacy_epoch: Option<String>,
    /// The legacy layout's unit: seconds (the default) or millis.
    #[arg(long, value_name = "UNIT", requires = "legacy")]
    pub legacy_unit: Option<String>,
    /// The legacy layout's prefix value, if it has prefix bits (default: all ones).
    #[arg(long, value_name = "N")]
    pub legacy_prefix_value: Option<String>,
    /// A named legacy layout instead of --legacy/--legacy-epoch/--legacy-unit.
    #[arg(long, value_enum, conflicts_with = "legacy")]
    pub legacy_preset: Option<Preset>,
    /// The highest legacy id observed (take it from your tables, plus any margin you want).
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    pub max_legacy_id: Option<String>,
    /// When the legacy generators stop (RFC 3339): the legacy maximum is then the largest id
    /// the legacy layout could issue by the cut-over plus the margin.
    #[arg(long, value_name = "RFC3339")]
    pub cutover: Option<String>,
    /// Seconds of ids handed out ahead of time, added to --cutover (default 86400, one day).
    #[arg(long, value_name = "S", requires = "cutover")]
    pub margin_seconds: Option<u64>,
    /// Worker bits of the new layout (2^W worker ids); or give --workers.
    #[arg(long, value_name = "W")]
    pub worker_bits: Option<u8>,
    /// Sequence bits of the new layout (2^S ids per tick and worker); or give --ids-per-second.
    #[arg(long, value_name = "S")]
    pub seq_bits: Option<u8>,
    /// Clock-back bits (at most 3) added to the worker field above the worker bits
    /// (snowflake.clock_back_bits): the plan reads T/cB+W/S.
    #[arg(long, value_name = "B")]
    pub clock_back_bits: Option<u8>,
    /// Regions (lanes, 1 to 8): ceil(log2(N)) region bits added to the worker field above the
    /// worker bits, which then count each region's workers (snowflake.worker.region_bits).
    #[arg(long, value_name = "N")]
    pub regions: Option<u64>,
    /// Peak number of workers at once: worker bits ceil(log2(N)), at least 1. With
    /// --worker-bits too, the bits are kept and must hold N.
    #[arg(long, value_name = "N")]
    pub workers: Option<u64>,
    /// Peak ids per second of each worker (or of the cluster, with --per cluster): sequence bits
    /// ceil(log2(ids per tick)), at least 1. With --seq-bits too, the bits are kept and must
    /// hold it.
    #[arg(long, value_name = "N")]
    pub ids_per_second: Option<u64>,
    /// Whose rate --ids-per-second is: worker (the default) or cluster (divided among
    /// --workers, rounded up).
    #[arg(long, value_name = "SCOPE", requires = "ids_per_second")]
    pub per: Option<String>,
    /// Every id of the plan at most 2^M - 1 (53: ids JavaScript numbers hold exactly);
    /// default 63.
    #[arg(long, value_name = "M")]
    pub max_id_bits: Option<u8>,
    /// Years from now through which the new layout must still issue ids.
    #[arg(long, value_name = "Y")]
    pub years: u32,
    /// A fixed epoch for the new layout (not in the future); the planner chooses it otherwise.
    #[arg(long, value_name = "RFC3339")]
    pub epoch: Option<String>,
    /// Unit of the new layout: seconds or millis (default: the legacy unit).
    #[arg(long, value_name = "UNIT")]
    pub unit: Option<String>,
    /// Plan as of this instant instead of the clock (RFC 3339), e.g. to reproduce a plan.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Print the JSON answer of `POST /api/v1/layouts/plan`.
    #[arg(long)]
    pub json: bool,
}

/// `leafid layout check ...`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The layout to check (from the configuration when left out).
    #[command(flatten)]
    pub layout: LayoutFlags,
    /// Every id from now on must be greater than this: the highest legacy id.
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    pub floor: Option<String>,
    /// Check as of this instant instead of the clock (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}
