//! Loading, typed values and validation of the settings.

use super::*;
use crate::snowflake::engine::GeneratorKind;
use crate::snowflake::layout::TimeUnit;
use crate::snowflake::worker::WorkerStrategy;
use std::path::Path;

#[test]
fn defaults_load_and_validate() {
    let s = Settings::load(None).unwrap();
    assert_eq!(s.server.port, 8080);
    assert_eq!(s.server.host, "127.0.0.1");
    assert!(s.database.url.starts_with("sqlite://"));
    assert!(s.segment.enabled && s.snowflake.enabled);
    assert!(s.admin.token.is_none());
}

#[test]
fn snowflake_layouts_come_from_presets_or_explicit_bits() {
    let mut s = Settings::load(None).unwrap();
    assert_eq!(s.snowflake_layout().unwrap().bits_string(), "41/10/12");
    s.snowflake.layout = Some("7+30/13/13".into());
    assert!(
        s.snowflake_layout()
            .unwrap_err()
            .to_string()
            .contains("snowflake.epoch")
    );
    s.snowflake.epoch = Some("2016-05-20T00:00:00+08:00".into());
    s.snowflake.unit = Some(TimeUnit::Seconds);
    let l = s.snowflake_layout().unwrap();
    assert_eq!((l.prefix_value(), l.epoch_ms()), (127, 1_463_673_600_000));
    s.snowflake.layout = Some("7+30/13/12".into());
    assert!(
        s.snowflake_layout()
            .unwrap_err()
            .to_string()
            .contains("snowflake.layout")
    );
}

#[test]
fn max_id_bits_refuses_wider_layouts_and_takes_js_safe() {
    let mut s = Settings::load(None).unwrap();
    assert_eq!(s.snowflake.max_id_bits, 63);
    s.snowflake.max_id_bits = 53;
    let e = s.snowflake_config().unwrap_err().to_string();
    assert!(e.contains("snowflake.max_id_bits = 53"), "{e}");
    assert!(e.contains("41/10/12") && e.contains("63 bits"), "{e}");
    s.snowflake.preset = Preset::JsSafe;
    let c = s.snowflake_config().unwrap();
    assert_eq!(c.layout.bits_string(), "10+31/8/14");
    assert_eq!(c.layout.largest_id(), (1 << 53) - 1);
    s.snowflake.prefix_value = Some(1);
    assert!(
        s.snowflake_config().is_err(),
        "a prefix of 1 lifts ids past 2^53"
    );
    // The preset brings its own 53-bit bound: refused with the default max_id_bits too.
    s.snowflake.max_id_bits = 63;
    let e = s.snowflake_config().unwrap_err().to_string();
    assert!(
        e.contains("snowflake.preset = \"js-safe\"") && e.contains("snowflake.prefix_value = 1"),
        "{e}"
    );
    s.snowflake.prefix_value = Some(0);
    assert_eq!(
        s.snowflake_config().unwrap().layout.largest_id(),
        (1 << 53) - 1
    );
    s.snowflake.prefix_value = None;
    s.snowflake.max_id_bits = 64;
    let e = s.snowflake_config().unwrap_err().to_string();
    assert!(
        e.contains("snowflake.max_id_bits must be within 1..=63"),
        "{e}"
    );
}

#[test]
fn a_bad_value_names_its_key() {
    let mut s = Settings::load(None).unwrap();
    s.segment.max_step = 0;
    let e = s.validate().unwrap_err().to_string();
    assert!(e.contains("segment.max_step"), "{e}");
    s.segment.max_step = 1_000_000_001;
    let e = s.validate().unwrap_err().to_string();
    assert_eq!(
        e,
        "invalid configuration: segment.max_step must be within 1..=1000000000"
    );
    s.segment.max_step = 1_000_000_000;
    s.validate().unwrap();
}

/// The defaults with `toml` layered over them (no environment: tests run in parallel).
fn with(toml: &str) -> anyhow::Result<Settings> {
    Settings::from_builder(
        Some(Path::new("test.toml")),
        config::Config::builder()
            .add_source(config::File::from_str(
                DEFAULT_TOML,
                config::FileFormat::Toml,
            ))
            .add_source(config::File::from_str(toml, config::FileFormat::Toml)),
    )
}

/// The one line a refused value gives.
fn refusal(toml: &str) -> String {
    format!("{:#}", with(toml).unwrap_err())
}

#[test]
fn defaults_are_typed() {
    let s = Settings::load(None).unwrap();
    assert_eq!(s.snowflake.preset, Preset::Twitter);
    assert_eq!(s.snowflake.generator, GeneratorKind::Cached);
    assert_eq!(s.snowflake.unit, None);
    assert_eq!(s.snowflake.worker.strategy, WorkerStrategy::Lease);
    assert_eq!(s.log.format, LogFormat::Text);
}

#[test]
fn presets_accept_their_exact_spellings_only() {
    for p in [Preset::Twitter, Preset::UidGenerator, Preset::JsSafe] {
        assert_eq!(p.as_str().parse(), Ok(p));
    }
    let s = with("[snowflake]\npreset = \"js-safe\"").unwrap();
    assert_eq!(s.snowflake.preset, Preset::JsSafe);
    // uid-generator parses; its exhausted time field is refused later, by the engine.
    let s = with("[snowflake]\npreset = \"uid-generator\"\nenabled = false").unwrap();
    assert_eq!(s.snowflake.preset, Preset::UidGenerator);
    for bad in ["Twitter", "js_safe", " twitter", ""] {
        assert!(bad.parse::<Preset>().is_err(), "{bad:?}");
    }
    assert_eq!(
        refusal("[snowflake]\npreset = \"snowflake\""),
        r#"invalid configuration: snowflake.preset must be "twitter", "uid-generator" or "js-safe" (got "snowflake")"#
    );
}

#[test]
fn generators_accept_their_exact_spellings_only() {
    assert_eq!("cached".parse(), Ok(GeneratorKind::Cached));
    assert_eq!("direct".parse(), Ok(GeneratorKind::Direct));
    for bad in ["Direct", "fast", ""] {
        assert!(bad.parse::<GeneratorKind>().is_err(), "{bad:?}");
    }
    let s = with("[snowflake]\ngenerator = \"direct\"").unwrap();
    assert_eq!(s.snowflake.generator, GeneratorKind::Direct);
    assert_eq!(
        refusal("[snowflake]\ngenerator = \"fast\""),
        r#"invalid configuration: snowflake.generator must be "cached" or "direct" (got "fast")"#
    );
}

#[test]
fn units_accept_seconds_and_millis() {
    let s = with("[snowflake]\nunit = \"millis\"").unwrap();
    assert_eq!(s.snowflake.unit, Some(TimeUnit::Millis));
    let s = with("[snowflake]\nunit = \" seconds \"").unwrap();
    assert_eq!(
        s.snowflake.unit,
        Some(TimeUnit::Seconds),
        "trimmed, as before"
    );
    let e = refusal("[snowflake]\nunit = \"ms\"");
    assert!(
        e.starts_with("invalid configuration: snowflake.unit: ") && e.contains("\"ms\""),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn worker_strategies_take_every_spelling_and_static_carries_its_id() {
    let strategy = |toml: &str| with(toml).map(|s| s.snowflake.worker.strategy);
    let cases = [
        ("strategy = \"lease\"", WorkerStrategy::Lease),
        ("strategy = \"Disposable\"", WorkerStrategy::Disposable),
        ("strategy = \" LEASE \"", WorkerStrategy::Lease),
        ("strategy = \"static:7\"", WorkerStrategy::Static(7)),
        ("strategy = \"static\"\nid = 3", WorkerStrategy::Static(3)),
        ("strategy = \"static:5\"\nid = 3", WorkerStrategy::Static(5)),
        ("strategy = \"lease\"\nid = 3", WorkerStrategy::Lease),
    ];
    for (toml, want) in cases {
        let got = strategy(&format!("[snowflake.worker]\n{toml}")).unwrap();
        assert_eq!(got, want, "{toml}");
    }
    assert_eq!(
        refusal("[snowflake.worker]\nstrategy = \"static\""),
        "invalid configuration: snowflake.worker.strategy: static worker strategy needs an id (static:N)"
    );
    assert_eq!(
        refusal("[snowflake.worker]\nstrategy = \"random\""),
        "invalid configuration: snowflake.worker.strategy: unknown worker strategy \"random\": \
         expected disposable, lease or static"
    );
    let e = refusal("[snowflake.worker]\nstrategy = \"static:x\"");
    assert!(
        e.contains("snowflake.worker.strategy") && e.contains("\"x\""),
        "{e}"
    );
}

#[test]
fn log_formats_accept_text_and_json_only() {
    assert_eq!(with("").unwrap().log.format, LogFormat::Text);
    let s = with("[log]\nformat = \"json\"").unwrap();
    assert_eq!(s.log.format, LogFormat::Json);
    for bad in ["JSON", "pretty", ""] {
        assert!(bad.parse::<LogFormat>().is_err(), "{bad:?}");
    }
    assert_eq!(
        refusal("[log]\nformat = \"pretty\""),
        r#"invalid configuration: log.format must be "text" or "json" (got "pretty")"#
    );
}

#[test]
fn the_shipped_admin_defaults_trust_no_peer_address() {
    let s = with("").unwrap();
    assert!(s.admin.token.is_none());
    assert!(
        !s.admin.trust_loopback,
        "a same-host proxy would open the admin API"
    );
    assert!(!s.admin.protect_reads);
}

#[test]
fn the_admin_token_never_prints() {
    let s = with("[admin]\ntoken = \"s3cret\"").unwrap();
    let token = s.admin.token.as_ref().unwrap();
    assert_eq!(token.expose(), "s3cret");
    assert_eq!(format!("{token:?} {token}"), "*** ***");
    let all = format!("{s:?}");
    assert!(
        !all.contains("s3cret") && all.contains("token: Some(***)"),
        "{all}"
    );
    assert_eq!(
        refusal("[admin]\ntoken = \"\""),
        "invalid configuration: admin.token must not be empty or blank when set"
    );
}

#[test]
fn the_worker_lease_cache_file_defaults_under_data_and_can_be_turned_off() {
    let s = Settings::load(None).unwrap();
    assert_eq!(s.snowflake.worker.cache_file, "data/snowflake-worker.json");
    let off = with("[snowflake.worker]\ncache_file = \"\"\n").unwrap();
    assert_eq!(off.snowflake.worker.cache_file, "");
    let moved = with("[snowflake.worker]\ncache_file = \" /var/lib/leafid/w.json \"\n").unwrap();
    assert_eq!(moved.snowflake.worker.cache_file, "/var/lib/leafid/w.json");
}

#[test]
fn unknown_keys_stop_the_start_naming_the_key_its_source_and_the_nearest() {
    let e = refusal("[admin]\ntokn = \"s3cret-s3cret\"");
    assert_eq!(
        e,
        "invalid configuration: unknown key admin.tokn (from file test.toml); did you mean admin.token?"
    );
    let e = refusal("[admn]\ntoken = \"x\"");
    assert!(e.contains("unknown key admn (from file test.toml)"), "{e}");
    let e = refusal("[snowflake.cached]\npadding = 50");
    assert!(
        e.contains("unknown key snowflake.cached.padding ") && e.contains("padding_factor"),
        "{e}"
    );
    let e = refusal("[server]\nworker = 4");
    assert!(e.contains("did you mean server.workers?"), "{e}");
}

#[test]
fn every_shipped_key_is_read_commented_out_ones_included() {
    // Uncomment every optional key (its example value is valid) and load: none is unknown.
    let all: String = DEFAULT_TOML
        .lines()
        .map(|l| match l.trim().strip_prefix("# ") {
            Some(a)
                if a.split_once(" = ").is_some_and(|(k, _)| {
                    !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                }) =>
            {
                a
            }
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut unknown = Vec::new();
    let c = config::Config::builder()
        .add_source(config::File::from_str(&all, config::FileFormat::Toml))
        .build()
        .unwrap();
    let _: Settings = serde_ignored::deserialize(c, |p| unknown.push(p.to_string())).unwrap();
    assert!(unknown.is_empty(), "{unknown:?}");
    assert!(keys::known_keys().len() >= 40);
}

#[test]
fn out_of_range_values_are_refused_before_anything_is_claimed() {
    for (toml, key) in [
        ("[server]\nworkers = 513", "server.workers"),
        ("[server]\nworkers = 10000", "server.workers"),
        (
            "[server]\nmax_body_bytes = 1000000000",
            "server.max_body_bytes",
        ),
        (
            "[server]\nshutdown_timeout_secs = 100000",
            "server.shutdown_timeout_secs",
        ),
        ("[server]\ndrain_secs = 100000", "server.drain_secs"),
        (
            "[database]\nmax_connections = 100000",
            "database.max_connections",
        ),
        (
            "[database]\nacquire_timeout_ms = 0",
            "database.acquire_timeout_ms",
        ),
        (
            "[database]\nacquire_timeout_ms = 9223372036854775807",
            "database.acquire_timeout_ms",
        ),
        (
            "[segment]\nwait_timeout_ms = 9223372036854775807",
            "segment.wait_timeout_ms",
        ),
        (
            "[segment]\nload_timeout_ms = 9223372036854775807",
            "segment.load_timeout_ms",
        ),
        (
            "[segment]\nmax_concurrent_loads = 1000000",
            "segment.max_concurrent_loads",
        ),
        (
            "[segment]\nrefresh_interval_secs = 9223372036854775807",
            "segment.refresh_interval_secs",
        ),
        (
            "[segment]\nstep_shrink_above_secs = 9223372036854775807",
            "segment.step_shrink_above_secs",
        ),
        (
            "[snowflake.worker]\nlease_secs = 9223372036854775807",
            "snowflake.worker.lease_secs",
        ),
        (
            "[snowflake.cached]\nmax_wait_ms = 9223372036854775807",
            "snowflake.cached.max_wait_ms",
        ),
        (
            "[snowflake.cached]\nschedule_interval_secs = 9223372036854775807",
            "snowflake.cached.schedule_interval_secs",
        ),
        ("[admin]\ntoken = \"   \"", "admin.token"),
        ("[admin]\ntoken = \" padded \"", "admin.token"),
        ("[admin]\ntoken = \"tab\\there\"", "admin.token"),
    ] {
        let e = refusal(toml);
        assert!(
            e.starts_with("invalid configuration: ") && e.contains(key),
            "{toml}: {e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
    }
    with("[server]\nworkers = 512").unwrap();
    with("[admin]\ntoken = \"a long enough token\"").unwrap();
}

#[test]
fn the_database_settings_debug_never_shows_the_password() {
    let settings = DatabaseSettings {
        url: "mysql://root:hunter2@127.0.0.1:3306/leaf".into(),
        max_connections: 1,
        acquire_timeout_ms: 1000,
        mysql_single_statement_lease: true,
        allow_lossy_commits: false,
        pgbouncer: false,
    };
    let shown = format!("{settings:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("root:***@127.0.0.1"), "{shown}");
}

/// Issue 43: each lanes mistake is named as what it is, in one readable line.
#[test]
fn lane_and_region_mistakes_are_named_plainly() {
    let mut s = Settings::load(None).unwrap();
    s.lanes.slot = Some(0);
    s.lanes.others = [("0".to_owned(), "sqlite://x.db".to_owned())].into();
    let e = s.lanes.other_lanes().unwrap_err().to_string();
    assert!(e.contains("own slot: two lanes"), "{e}");
    assert!(!e.contains("  "), "no run of spaces: {e:?}");
    s.lanes.others.clear();
    s.snowflake.worker.region_bits = 2;
    s.lanes.slot = Some(4);
    let e = s.snowflake_config().unwrap_err().to_string();
    assert!(e.contains("lanes.slot = 4 does not fit"), "{e}");
    assert!(!e.contains("worker ids have"), "not the worker bits: {e}");
    s.lanes.slot = Some(1);
    s.snowflake.worker.region_bits = 10;
    let e = s.snowflake_config().unwrap_err().to_string();
    assert!(e.contains("at least one must be left"), "{e}");
}
